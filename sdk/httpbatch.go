package sdk

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// HTTPBatchSender is the BatchSender of a provider that takes many messages
// in one HTTP request and answers per message: Build makes the request for
// a group of messages, Parse reads the answer into verdicts by key, and
// HTTPBatchSender does the rest — groups of at most MaxPerRequest, up to
// HTTPBatchRequestsAtOnce requests at once, a failed request's verdict
// (ClassifyHTTP's, as HTTPSender's) for every message it carried, answers
// matched to messages by key and never by position, exactly one verdict per
// message, redacted details and a bounded read, as HTTPSender.
//
// Build, Parse and KeyOf are called from several goroutines at once (the
// requests of one call, and concurrent calls): keep them free of shared
// mutable state, as Send and SendBatch must be.
type HTTPBatchSender struct {
	// Build makes the request for ms, sending each message with its key
	// (KeyOf; Message.Key by default) for the provider to echo. An error
	// fails the request's messages as HTTPSender's Build error does; when
	// the request had several, each is built and sent again alone, so one
	// message Build refuses fails by itself. Required.
	Build func(ctx context.Context, ms []Message) (*http.Request, error)
	// Parse reads a 2xx answer to the request for ms into verdicts by key.
	// A key it leaves out is TRANSIENT ("no result for this message"), a key
	// that is not one of ms is ignored, and an error makes every message of
	// the request TRANSIENT (it reached the provider: a retry may send twice
	// but never loses one). Required.
	Parse func(resp *http.Response, body []byte, ms []Message) (map[string]Verdict, error)
	// KeyOf is the key a message is matched by; nil is Message.Key (the ID
	// in decimal). Messages whose keys are equal never share a request.
	KeyOf func(Message) string
	// MaxPerRequest is the provider's limit of messages per request; 0 is
	// no limit (the host's batch, at most 1,000).
	MaxPerRequest int
	// Client, Redactor and MaxAnswer are as HTTPSender's.
	Client    *http.Client
	Redactor  *Redactor
	MaxAnswer int64
}

// Key is the message's key for matching a provider's per-message answer to
// it: its ID in decimal, unique in a call and the same on every attempt.
func (m Message) Key() string { return strconv.FormatInt(m.ID, 10) }

// Send sends m alone: a batch of one.
func (s *HTTPBatchSender) Send(ctx context.Context, m Message) Verdict {
	return s.SendBatch(ctx, []Message{m})[0]
}

// SendBatch sends ms in requests of at most MaxPerRequest messages and
// returns one verdict per message, vs[i] for ms[i].
func (s *HTTPBatchSender) SendBatch(ctx context.Context, ms []Message) []Verdict {
	vs := make([]Verdict, len(ms))
	if s.Build == nil || s.Parse == nil {
		for i := range vs {
			vs[i] = Transient("sdk.HTTPBatchSender needs both Build and Parse")
		}
		return vs
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = s.key(m)
	}
	refused := s.each(ctx, ms, keys, s.groups(keys), vs)
	var alone [][]int
	for _, g := range refused {
		for _, i := range g {
			alone = append(alone, []int{i})
		}
	}
	s.each(ctx, ms, keys, alone, vs)
	return vs
}

func (s *HTTPBatchSender) key(m Message) string {
	if s.KeyOf != nil {
		return s.KeyOf(m)
	}
	return m.Key()
}

// groups splits the messages (by index) into requests: at most
// MaxPerRequest each, and no key twice in one, so every answer names one
// message.
func (s *HTTPBatchSender) groups(keys []string) [][]int {
	var out [][]int
	var cur []int
	seen := map[string]bool{}
	for i, k := range keys {
		if seen[k] || (s.MaxPerRequest > 0 && len(cur) == s.MaxPerRequest) {
			out, cur, seen = append(out, cur), nil, map[string]bool{}
		}
		cur, seen[k] = append(cur, i), true
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// each sends the groups, up to HTTPBatchRequestsAtOnce at once, and fills
// their verdicts. It returns the groups of several messages whose Build
// failed, their verdicts unset.
func (s *HTTPBatchSender) each(ctx context.Context, ms []Message, keys []string, groups [][]int, vs []Verdict) (refused [][]int) {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, HTTPBatchRequestsAtOnce)
	)
	for _, g := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !s.sendGroup(ctx, ms, keys, g, vs) {
				mu.Lock()
				refused = append(refused, g)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return refused
}

// sendGroup sends one request and sets the verdicts of its messages (each
// index belongs to one group, so goroutines never write the same slot). It
// is false, with nothing set, when Build failed for a group of several.
func (s *HTTPBatchSender) sendGroup(ctx context.Context, all []Message, keys []string, g []int, vs []Verdict) (done bool) {
	ms := make([]Message, len(g))
	for j, i := range g {
		ms[j] = all[i]
	}
	each := func(v Verdict) bool {
		for _, i := range g {
			vs[i] = v
		}
		return true
	}
	// A panic in Build or Parse costs this request's messages, not the
	// process: this goroutine is not the SDK's, which recovers its own.
	defer func() {
		if r := recover(); r != nil {
			done = each(Transient(fmt.Sprintf("%s: %v", DetailPanic, r)))
		}
	}()
	req, err := s.Build(ctx, ms)
	x := newExchange(s.Client, s.Redactor, req, s.MaxAnswer)
	if v, failed := x.built(ctx, err); failed {
		if v.Outcome == OutcomePermanent && len(g) > 1 {
			return false
		}
		return each(v)
	}
	v, resp, body := x.do(ctx, true)
	if v.Outcome != OutcomeSuccess {
		return each(v)
	}
	got, err := s.Parse(resp, body, ms)
	if err != nil {
		return each(x.redact(Transient("read the answer: " + err.Error()).WithStatus(resp.StatusCode)))
	}
	for _, i := range g {
		r, ok := got[keys[i]]
		if !ok {
			r = Transient(fmt.Sprintf("the provider's answer has no result for this message (key %q)", keys[i]))
		}
		if r.ProviderStatus == 0 {
			r.ProviderStatus = resp.StatusCode
		}
		vs[i] = x.redact(r)
	}
	return true
}
