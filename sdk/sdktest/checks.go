package sdktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// unknownKey is added to Features.Config to check strict decoding.
const unknownKey = "sdktest_unknown_key"

func (s *suite) checks() []check {
	cs := []check{
		{"Describe", true, s.describe},
		{"Configure/valid", true, s.configureValid},
	}
	names := make([]string, 0, len(s.f.Invalid))
	for name := range s.f.Invalid {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg := s.f.Invalid[name]
		cs = append(cs, check{"Configure/invalid/" + name, false, func() error { return s.configureInvalid(cfg, "") }})
	}
	if !s.f.AllowUnknownKeys {
		cs = append(cs, check{"Configure/unknown key", false, s.configureUnknownKey})
	}
	cs = append(cs,
		// Rejected configs above may have stopped the channel: set it again.
		check{"Configure/valid again", true, s.configureValid},
		check{"Send/success", false, s.sendSuccess},
	)
	if s.f.Permanent != nil {
		cs = append(cs, check{"Send/permanent", false, s.sendPermanent})
	}
	if s.f.Transient != nil {
		cs = append(cs, check{"Send/transient", false, s.sendTransient})
	}
	if s.f.RetryAfter != nil {
		cs = append(cs, check{"Send/transient with Retry-After", false, s.sendRetryAfter})
	}
	if s.f.Permanent != nil || s.f.Transient != nil {
		cs = append(cs, check{"Send/mixed batch", false, s.sendMixed})
	}
	if s.f.BatchAPI != nil {
		cs = append(cs, check{"Send/batch answered out of order", false, s.sendShuffled})
	}
	return append(cs,
		check{"Send/batch", false, s.sendBatch},
		check{"Send/concurrent batches", false, s.sendConcurrent},
		check{"Send/expired deadline", false, s.sendExpired},
		check{"Send/unconfigured channel", false, s.sendUnconfigured},
		check{"Send/odd payloads", false, s.sendOddPayloads},
		check{"Health", false, s.health},
	)
}

func (s *suite) describe() error {
	ctx, cancel := s.ctx()
	defer cancel()
	info, err := s.c.Describe(ctx)
	if err != nil {
		return err
	}
	s.rep.Info = info
	var errs []error
	if !NameRE.MatchString(info.Name) {
		errs = append(errs, fmt.Errorf("Describe: Name %q must match %s (it is the <name> in notifyd-plugin-<name>)", info.Name, NameRE))
	}
	if info.Version == "" {
		errs = append(errs, errors.New("Describe: Version is empty; operators need it in `notifyd plugins list`"))
	}
	if len(info.ConfigSchema) > 0 && !json.Valid(info.ConfigSchema) {
		errs = append(errs, errors.New("Describe: ConfigSchema is not valid JSON"))
	}
	if info.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("Describe: MaxConcurrency %d is negative", info.MaxConcurrency))
	}
	return errors.Join(errs...)
}

func (s *suite) configureValid() error {
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.c.Configure(ctx, Channel, s.f.Config); err != nil {
		return fmt.Errorf("Configure(Features.Config): got %v, want it accepted", err)
	}
	return nil
}

// configureInvalid wants cfg rejected with a message (containing want, if
// set), on a channel of its own so the suite's channel stays configured.
func (s *suite) configureInvalid(cfg json.RawMessage, want string) error {
	ctx, cancel := s.ctx()
	defer cancel()
	err := s.c.Configure(ctx, Channel+"-invalid", cfg)
	var ce *providerclient.ConfigError
	switch {
	case err == nil:
		return fmt.Errorf("Configure(%s): accepted, want it rejected", cfg)
	case !errors.As(err, &ce):
		return fmt.Errorf("Configure(%s): the call failed (%v); want a rejection in the response", cfg, err)
	case strings.TrimSpace(ce.Message) == "":
		return fmt.Errorf("Configure(%s): rejected without a message; say which key is wrong and why", cfg)
	case want != "" && !strings.Contains(ce.Message, want):
		return fmt.Errorf("Configure(%s): rejected with %q, want the message to name %q", cfg, ce.Message, want)
	}
	return nil
}

func (s *suite) configureUnknownKey() error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(s.f.Config, &obj); err != nil || obj == nil {
		return fmt.Errorf("Features.Config must be a JSON object for this check (or set AllowUnknownKeys): %s", s.f.Config)
	}
	obj[unknownKey] = json.RawMessage("true")
	cfg, _ := json.Marshal(obj)
	return s.configureInvalid(cfg, unknownKey)
}

func (s *suite) sendSuccess() error {
	m := s.msg(s.f.Succeed)
	vs, err := s.send([]sdk.Message{m})
	if err != nil {
		return err
	}
	if vs[0].Outcome != sdk.OutcomeSuccess {
		return fmt.Errorf("Send(Features.Succeed): got %v %q, want SUCCESS", vs[0].Outcome, vs[0].Detail)
	}
	s.rep.Sent = append(s.rep.Sent, m)
	return nil
}

func (s *suite) sendPermanent() error {
	vs, err := s.send([]sdk.Message{s.msg(*s.f.Permanent)})
	if err != nil {
		return err
	}
	if vs[0].Outcome != sdk.OutcomePermanent || vs[0].Detail == "" {
		return fmt.Errorf("Send(Features.Permanent): got %v %q, want PERMANENT with a Detail", vs[0].Outcome, vs[0].Detail)
	}
	return nil
}

// sendN sends one batch of n copies of Succeed and wants them all SUCCESS.
func (s *suite) sendTransient() error {
	vs, err := s.send([]sdk.Message{s.msg(*s.f.Transient)})
	if err != nil {
		return err
	}
	if vs[0].Outcome != sdk.OutcomeTransient || vs[0].Detail == "" {
		return fmt.Errorf("Send(Features.Transient): got %v %q, want TRANSIENT with a Detail", vs[0].Outcome, vs[0].Detail)
	}
	return nil
}

func (s *suite) sendRetryAfter() error {
	vs, err := s.send([]sdk.Message{s.msg(*s.f.RetryAfter)})
	if err != nil {
		return err
	}
	v := vs[0]
	min := max(s.f.RetryAfterMin, time.Nanosecond)
	if v.Outcome != sdk.OutcomeTransient || v.RetryAfter < min {
		return fmt.Errorf("Send(Features.RetryAfter): got %v retry_after %s %q, want TRANSIENT with retry_after at least %s", v.Outcome, v.RetryAfter, v.Detail, min)
	}
	return nil
}

func (s *suite) sendN(n int, mu *sync.Mutex) error {
	ms := make([]sdk.Message, n)
	mu.Lock()
	for i := range ms {
		ms[i] = s.msg(s.f.Succeed)
	}
	mu.Unlock()
	vs, err := s.send(ms)
	if err != nil {
		return err
	}
	var wrong []string
	for i, v := range vs {
		if v.Outcome != sdk.OutcomeSuccess {
			wrong = append(wrong, fmt.Sprintf("message %d of %d: got %v %q, want SUCCESS", i+1, n, v.Outcome, v.Detail))
		}
	}
	if err := summarize(wrong, n); err != nil {
		return err
	}
	mu.Lock()
	s.rep.Sent = append(s.rep.Sent, ms...)
	mu.Unlock()
	return nil
}

// sendMixed sends one batch interleaving the Succeed, Permanent and
// Transient messages: each must get its own verdict, in order — what a
// BatchSender that puts many recipients in one provider request has to
// classify per recipient.
func (s *suite) sendMixed() error {
	type want struct {
		tmpl    sdk.Message
		outcome sdk.Outcome
	}
	kinds := []want{{s.f.Succeed, sdk.OutcomeSuccess}}
	if s.f.Permanent != nil {
		kinds = append(kinds, want{*s.f.Permanent, sdk.OutcomePermanent})
	}
	if s.f.Transient != nil {
		kinds = append(kinds, want{*s.f.Transient, sdk.OutcomeTransient})
	}
	n := max(s.batch(), 3*len(kinds))
	ms := make([]sdk.Message, n)
	wants := make([]sdk.Outcome, n)
	for i := range ms {
		k := kinds[i%len(kinds)]
		ms[i], wants[i] = s.msg(k.tmpl), k.outcome
	}
	vs, err := s.send(ms)
	if err != nil {
		return err
	}
	var wrong []string
	var sent []sdk.Message
	for i, v := range vs {
		if v.Outcome != wants[i] {
			wrong = append(wrong, fmt.Sprintf("message %d of %d (recipient %q): got %v %q, want %v", i+1, n, ms[i].Recipient, v.Outcome, v.Detail, wants[i]))
		}
		if v.Outcome == sdk.OutcomeSuccess {
			sent = append(sent, ms[i])
		}
	}
	s.rep.Sent = append(s.rep.Sent, sent...)
	return summarize(wrong, n)
}

// sendShuffled sends one batch through Features.BatchAPI in which every
// third recipient is refused by the fake, which answers in shuffled order:
// exactly those must come back PERMANENT, the others SUCCESS, and the fake
// must have seen each message once.
func (s *suite) sendShuffled() error {
	fake := s.f.BatchAPI
	fake.mu.Lock()
	inOrder := fake.inOrder
	fake.mu.Unlock()
	if inOrder {
		return errors.New("Features.BatchAPI answers in order (InOrder(true)); this check needs it shuffled")
	}
	n := max(s.batch(), 12)
	ms := make([]sdk.Message, n)
	wants := make([]sdk.Outcome, n)
	rejects := 0
	for i := range ms {
		ms[i], wants[i] = s.msg(s.f.Succeed), sdk.OutcomeSuccess
		if i%3 == 1 {
			ms[i].Recipient, wants[i] = RejectPrefix+ms[i].Recipient, sdk.OutcomePermanent
			rejects++
		}
	}
	before := len(fake.Items())
	vs, err := s.send(ms)
	if err != nil {
		return err
	}
	var errs []error
	var sent []sdk.Message
	wrong := 0
	for i, v := range vs {
		if v.Outcome == sdk.OutcomeSuccess {
			sent = append(sent, ms[i])
		}
		if v.Outcome == wants[i] {
			continue
		}
		if wrong++; wrong <= 5 { // a bounded summary
			errs = append(errs, fmt.Errorf("message %d of %d (ID %d, recipient %q): got %v %q, want %v", i+1, n, ms[i].ID, ms[i].Recipient, v.Outcome, v.Detail, wants[i]))
		}
	}
	s.rep.Sent = append(s.rep.Sent, sent...)
	if wrong > 0 {
		return fmt.Errorf("%d of %d messages got another message's verdict or none; match the provider's results by the key you sent (Message.ID), never by position (%s):\n%w",
			wrong, n, fake.seedNote(), errors.Join(errs...))
	}
	got := map[string]int{}
	for _, it := range fake.Items()[before:] {
		got[it.Status]++
	}
	if got[FakeAccepted] != n-rejects || got[FakeRejected] != rejects {
		return fmt.Errorf("Features.BatchAPI accepted %d and rejected %d items of this batch, want %d and %d: point Features.Config at BatchAPI.URL and send each message, recipient as given, once",
			got[FakeAccepted], got[FakeRejected], n-rejects, rejects)
	}
	return nil
}

func (s *suite) sendBatch() error { return s.sendN(s.batch(), &sync.Mutex{}) }

// sendConcurrent has the host send several batches at once, as notifyd does
// for a busy channel.
func (s *suite) sendConcurrent() error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = make([]error, 4)
	)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.sendN(s.batch(), &mu)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sendExpired: a message whose deadline passed must come back TRANSIENT —
// never delivered late, never dropped.
func (s *suite) sendExpired() error {
	m := s.msg(s.f.Succeed)
	m.Deadline = time.Now().Add(-time.Second)
	vs, err := s.send([]sdk.Message{m})
	if err != nil {
		return err
	}
	if vs[0].Outcome != sdk.OutcomeTransient {
		return fmt.Errorf("Send(expired deadline): got %v %q, want TRANSIENT", vs[0].Outcome, vs[0].Detail)
	}
	return nil
}

func (s *suite) sendUnconfigured() error {
	m := s.msg(s.f.Succeed)
	m.Channel = Channel + "-never-configured"
	vs, err := s.send([]sdk.Message{m})
	if err != nil {
		return err
	}
	if vs[0].Outcome != sdk.OutcomeTransient {
		return fmt.Errorf("Send(unconfigured channel): got %v %q, want TRANSIENT", vs[0].Outcome, vs[0].Detail)
	}
	return nil
}

// sendOddPayloads: whatever a payload holds, Send answers without
// panicking; the plugin is still up afterwards.
func (s *suite) sendOddPayloads() error {
	var ms []sdk.Message
	for _, p := range []string{`{}`, `null`, `[]`, `"text"`, `0`, `{"":null}`, `{"` + strings.Repeat("x", 64<<10) + `":1}`} {
		m := s.msg(s.f.Succeed)
		m.Payload = json.RawMessage(p)
		ms = append(ms, m)
	}
	m := s.msg(s.f.Succeed)
	m.Recipient = ""
	ms = append(ms, m)
	if _, err := s.send(ms); err != nil {
		return err
	}
	return s.health()
}

func (s *suite) health() error {
	ctx, cancel := s.ctx()
	defer cancel()
	unhealthy, err := s.c.Health(ctx)
	if err != nil {
		return err
	}
	if err := providerclient.HealthError(unhealthy); err != nil {
		return fmt.Errorf("Health: %w", err)
	}
	return nil
}

// summarize is one error for the messages that got the wrong verdict, bounded
// whatever the batch size: how many, and the first few (a batch of 1,000
// once printed 3,298 lines).
func summarize(wrong []string, n int) error {
	const shown = 5
	switch {
	case len(wrong) == 0:
		return nil
	case len(wrong) <= shown:
		return errors.New(strings.Join(wrong, "\n"))
	}
	return fmt.Errorf("%d of %d messages got the wrong verdict; the first %d:\n%s", len(wrong), n, shown, strings.Join(wrong[:shown], "\n"))
}
