package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/wire"
)

// server is the plugin side of notifyd.provider.v1: it routes each message
// to the Sender its channel was configured with.
type server struct {
	providerv1.UnimplementedProviderServer

	p       Provider
	info    Info
	limit   int
	log     hclog.Logger
	tracing tracing

	mu      sync.RWMutex
	senders map[string]Sender

	// idle hands a send to a worker goroutine waiting for one (see run).
	idle chan sendJob
	// running is every Send and SendBatch call under way, for the
	// liveness check's count of stuck ones (StuckAfter).
	running calls

	// health runs each channel's provider health check once at a time: the
	// calls that come while it runs share it (keyed by channel).
	healthFlight singleflight.Group

	callbackMu sync.Mutex
	callbacks  map[string]*callbackSlots // by channel: its callback handlers running
}

func newServer(p Provider, info Info, log hclog.Logger, tr tracing) *server {
	return &server{
		p:       p,
		info:    info,
		limit:   cmpOr(info.MaxConcurrency, DefaultMaxConcurrency),
		log:     log,
		tracing: tr,
		senders: map[string]Sender{},
		idle:    make(chan sendJob),
	}
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// validateInfo rejects an Info the host could not use, before the handshake,
// so the host's start error carries the reason.
func validateInfo(info Info) error {
	switch {
	case info.Name == "":
		return errors.New("Describe returned an empty Name")
	case info.MaxConcurrency < 0:
		return fmt.Errorf("Describe returned MaxConcurrency %d; want 0 (default) or more", info.MaxConcurrency)
	case len(info.ConfigSchema) > 0 && !jsonValid(info.ConfigSchema):
		return errors.New("Describe returned a ConfigSchema that is not valid JSON")
	}
	return nil
}

func (s *server) Describe(context.Context, *providerv1.DescribeRequest) (*providerv1.DescribeResponse, error) {
	caps := make([]string, len(s.info.Capabilities))
	for i, c := range s.info.Capabilities {
		caps[i] = wireText(c)
	}
	return &providerv1.DescribeResponse{
		Name:           wireText(s.info.Name),
		Version:        wireText(s.info.Version),
		Capabilities:   caps,
		ConfigSchema:   s.info.ConfigSchema,
		MaxConcurrency: int32(s.info.MaxConcurrency),
	}, nil
}

// Configure answers a rejected config inside the response, not as a gRPC
// error: the host shows the provider's message to the operator as written.
// A channel whose new config is rejected stops: it never keeps sending with
// the config it had before.
func (s *server) Configure(ctx context.Context, req *providerv1.ConfigureRequest) (*providerv1.ConfigureResponse, error) {
	if req.Channel == "" {
		return &providerv1.ConfigureResponse{Error: "configure: empty channel name"}, nil
	}
	sender, err := s.configure(ctx, req)
	s.mu.Lock()
	old := s.senders[req.Channel]
	if err != nil {
		delete(s.senders, req.Channel)
	} else {
		s.senders[req.Channel] = sender
	}
	s.mu.Unlock()
	// A new Sender's health is its own: not the old one's check under way.
	s.healthFlight.Forget(req.Channel)
	if c, ok := old.(io.Closer); ok && !same(old, sender) {
		s.closeSender(req.Channel, c)
	}
	if err != nil {
		s.log.Warn("channel config rejected", "channel", req.Channel, "error", err)
		return &providerv1.ConfigureResponse{Error: CutText(err.Error(), MaxConfigError)}, nil
	}
	s.log.Debug("channel configured", "channel", req.Channel)
	return &providerv1.ConfigureResponse{Batches: isBatchSender(sender)}, nil
}

func (s *server) configure(ctx context.Context, req *providerv1.ConfigureRequest) (sender Sender, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("Configure panicked", "channel", req.Channel, "panic", r, "stack", string(debug.Stack()))
			sender, err = nil, fmt.Errorf("plugin panicked in Configure: %v", r)
		}
	}()
	sender, err = s.p.Configure(ctx, ConfigureRequest{
		Channel: req.Channel,
		Config:  req.Config,
		Logger:  s.log.With("channel", req.Channel),
	})
	if err == nil && sender == nil {
		err = errors.New("plugin returned neither a Sender nor an error from Configure")
	}
	return sender, err
}

// same reports whether a and b are the same Sender; a Sender of a type that
// cannot be compared (a func, a struct holding one) is never the same.
func same(a, b Sender) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// closeSender closes a replaced Sender; a panic or error is logged, never
// the caller's problem.
func (s *server) closeSender(channel string, c io.Closer) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("Close panicked", "channel", channel, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if err := c.Close(); err != nil {
		s.log.Warn("closing the channel's previous sender", "channel", channel, "error", err)
	}
}

func (s *server) sender(channel string) Sender {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.senders[channel]
}

// Health answers while the process is alive; each configured channel whose
// Sender is a HealthChecker reports its own state inside the response, so a
// provider outage never makes the host restart a healthy process.
func (s *server) Health(ctx context.Context, req *providerv1.HealthRequest) (*providerv1.HealthResponse, error) {
	if req.LivenessOnly {
		if n := s.running.stuck(time.Now()); n > 0 {
			msg := fmt.Sprintf("%d sends still running more than %s past their deadlines: provider code that ignores its context (a loop, a call made without it) holds a core or memory for good; replace this process", n, StuckAfter)
			s.log.Error(msg)
			return nil, status.Error(codes.ResourceExhausted, msg)
		}
		return &providerv1.HealthResponse{}, nil
	}
	s.mu.RLock()
	channels := make([]string, 0, len(s.senders))
	for ch := range s.senders {
		channels = append(channels, ch)
	}
	s.mu.RUnlock()
	sort.Strings(channels)

	// Checks run side by side and stop short of the host's deadline, so a
	// slow provider shows up as that channel's error, not as a dead plugin.
	hctx, cancel := healthContext(ctx)
	defer cancel()
	resp := &providerv1.HealthResponse{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, ch := range channels {
		hc, ok := s.sender(ch).(HealthChecker)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			select {
			case r := <-s.healthRun(hctx, ch, hc):
				err = r.Err
			case <-hctx.Done():
				err = fmt.Errorf("health check did not answer in time: %w", hctx.Err())
			}
			msg := ""
			if err != nil {
				msg = CutText(err.Error(), MaxHealthError)
			}
			mu.Lock()
			resp.Channels = append(resp.Channels, &providerv1.ChannelHealth{Channel: ch, Error: msg})
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(resp.Channels, func(i, j int) bool { return resp.Channels[i].Channel < resp.Channels[j].Channel })
	return resp, nil
}

// healthRun joins the channel's check under way, or starts one bounded by
// ctx's deadline (not its cancel: a later caller may be waiting for it). A
// check that ignores its context (a call made without it) never returns:
// each Health call used to leave one more goroutine behind it — one per
// /readyz probe and dashboard page, for the life of the process — and now
// the channel has that one, its callers told it did not answer in time.
func (s *server) healthRun(ctx context.Context, ch string, hc HealthChecker) <-chan singleflight.Result {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(healthTimeout)
	}
	check := context.WithoutCancel(ctx)
	return s.healthFlight.DoChan(ch, func() (any, error) {
		cctx, cancel := context.WithDeadline(check, dl)
		defer cancel()
		return nil, s.health(cctx, hc)
	})
}

// healthContext leaves a fifth of the host's time for the answer to travel
// back; without a host deadline a check gets healthTimeout.
func healthContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithTimeout(ctx, healthTimeout)
	}
	return context.WithTimeout(ctx, time.Until(dl)*4/5)
}

// healthTimeout bounds a provider health check when the host set no deadline.
const healthTimeout = 5 * time.Second

func (s *server) health(ctx context.Context, hc HealthChecker) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plugin panicked in Health: %v", r)
		}
	}()
	return hc.Health(ctx)
}

// fromProto converts one wire message.
func fromProto(m *providerv1.Message) Message {
	msg := Message{
		ID:             m.Id,
		Channel:        m.Channel,
		Recipient:      m.Recipient,
		Payload:        m.Payload,
		Attempt:        int(m.Attempt),
		IdempotencyKey: m.IdempotencyKey,
		TraceParent:    m.TraceParent,
	}
	if m.CreatedAtUnixNano != 0 {
		msg.CreatedAt = time.Unix(0, m.CreatedAtUnixNano)
	}
	if m.DeadlineUnixNano != 0 {
		msg.Deadline = time.Unix(0, m.DeadlineUnixNano)
	}
	return msg
}

// wireText is s as a protobuf string may carry it: valid UTF-8, each invalid
// byte replaced by U+FFFD. Protobuf refuses to marshal a message with one
// invalid string, and the whole answer with it: a provider's Latin-1 error
// text in one verdict failed its call, and the host then took every message
// of the call — those delivered too — for an unknown outcome and sent them
// again. The check is a scan of the text; valid text is not copied.
func wireText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// MaxConfigError and MaxHealthError bound the text of a refused config and of
// a channel's failed health check as the plugin sends them.
const (
	MaxConfigError = 4096
	MaxHealthError = 1024
)

// toProto converts one (already validated) verdict into w, a zero Verdict.
func toProto(w *providerv1.Verdict, v Verdict) {
	w.Outcome = providerv1.Outcome(v.Outcome)
	w.RetryAfterMs = v.RetryAfter.Milliseconds()
	w.ProviderStatus = int32(v.ProviderStatus)
	w.ProviderCode = wireText(v.ProviderCode)
	w.Detail = wireText(v.Detail)
	w.Result = v.Result
}

// Callback hands a provider's callback to the channel's Sender when it is a
// CallbackHandler; otherwise it answers UNIMPLEMENTED, as a plugin built
// before callbacks existed does, and the host tells the caller the channel
// takes none. A handler's error is the caller's answer (inside the
// response); a panic is logged and answered as an error.
func (s *server) Callback(ctx context.Context, req *providerv1.CallbackRequest) (*providerv1.CallbackResponse, error) {
	sender := s.sender(req.Channel)
	if sender == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "channel %s is not configured in this plugin", req.Channel)
	}
	h, ok := sender.(CallbackHandler)
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "plugin %s takes no callbacks (its Sender is not a CallbackHandler)", s.info.Name)
	}
	ans, err, rpcErr := s.callbackRun(ctx, req.Channel, h, callbackFromProto(req))
	if rpcErr != nil {
		return nil, rpcErr
	}
	if err != nil {
		return &providerv1.CallbackResponse{Error: CutText(err.Error(), MaxReceiptDetail)}, nil
	}
	if len(ans.Updates) > MaxCallbackUpdates {
		return &providerv1.CallbackResponse{Error: fmt.Sprintf("the plugin read %d updates from one callback; at most %d are taken (send fewer per callback)",
			len(ans.Updates), MaxCallbackUpdates)}, nil
	}
	return callbackAnswerToProto(ans), nil
}

// MaxCallbacksRunning bounds the callback handlers of one channel running at
// once in the plugin process, those still running after their caller gave
// up included. A callback that finds them all busy waits for one to end,
// until the host's deadline; one that finds them all held by handlers past
// their deadline is refused at once (codes.ResourceExhausted), and the host
// answers the provider 503 with Retry-After, so it calls again.
const MaxCallbacksRunning = 16

// callbackSlots are a channel's callback handlers running; late counts
// those whose caller has had its answer (a handler that ignores its
// context). They stay the channel's when it is configured again: the
// goroutines are still there.
type callbackSlots struct {
	sem  chan struct{}
	late atomic.Int32
}

func (s *server) callbackSlots(ch string) *callbackSlots {
	s.callbackMu.Lock()
	defer s.callbackMu.Unlock()
	cs, ok := s.callbacks[ch]
	if !ok {
		if s.callbacks == nil {
			s.callbacks = map[string]*callbackSlots{}
		}
		cs = &callbackSlots{sem: make(chan struct{}, MaxCallbacksRunning)}
		s.callbacks[ch] = cs
	}
	return cs
}

// callbackRun runs the handler in a goroutine of its own and answers at
// ctx's end if the handler has not. A handler that ignores its context (a
// call made without it) never returns: it held the gRPC call's goroutine,
// its request and body, for the life of the process, one more for every
// callback the provider made or retried. Such a handler keeps its slot now,
// and at most MaxCallbacksRunning of a channel's run at once; a callback
// past them is refused with codes.ResourceExhausted. err is the handler's,
// rpcErr the call's when the handler gave no answer.
func (s *server) callbackRun(ctx context.Context, ch string, h CallbackHandler, req CallbackRequest) (ans CallbackAnswer, err, rpcErr error) {
	cs := s.callbackSlots(ch)
	busy := func() error {
		return status.Errorf(codes.ResourceExhausted,
			"channel %s: %d callback handlers running, %d of them past their callers' deadlines (a HandleCallback that ignores its context); this callback was not read: call again",
			ch, MaxCallbacksRunning, cs.late.Load())
	}
	if int(cs.late.Load()) >= MaxCallbacksRunning {
		return CallbackAnswer{}, nil, busy()
	}
	select {
	case cs.sem <- struct{}{}:
	case <-ctx.Done():
		return CallbackAnswer{}, nil, busy()
	}
	type result struct {
		ans CallbackAnswer
		err error
	}
	done := make(chan result, 1)
	// state: 0 running, 1 answered in time, 2 late (its caller gone).
	var state atomic.Int32
	go func() {
		defer func() { <-cs.sem }()
		ans, err := s.callback(ctx, h, req)
		if !state.CompareAndSwap(0, 1) {
			cs.late.Add(-1)
			s.log.Warn("HandleCallback returned after its caller's deadline", "channel", ch)
		}
		done <- result{ans, err}
	}()
	select {
	case r := <-done:
		return r.ans, r.err, nil
	case <-ctx.Done():
	}
	if !state.CompareAndSwap(0, 2) {
		r := <-done // it answered as the deadline came
		return r.ans, r.err, nil
	}
	n := cs.late.Add(1)
	s.log.Error("HandleCallback did not return by its caller's deadline: provider code that ignores its context holds a callback slot until it returns",
		"channel", ch, "late", n, "slots", MaxCallbacksRunning)
	return CallbackAnswer{}, nil, status.Errorf(codes.DeadlineExceeded, "channel %s: the callback handler did not answer in time: %v", ch, ctx.Err())
}

func (s *server) callback(ctx context.Context, h CallbackHandler, req CallbackRequest) (ans CallbackAnswer, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("HandleCallback panicked", "channel", req.Channel, "panic", r, "stack", string(debug.Stack()))
			ans, err = CallbackAnswer{}, fmt.Errorf("plugin panicked reading the callback")
		}
	}()
	return h.HandleCallback(ctx, req)
}

func callbackFromProto(req *providerv1.CallbackRequest) CallbackRequest {
	out := CallbackRequest{Channel: req.Channel, Headers: http.Header{}, Body: req.Body}
	for _, h := range req.Headers {
		out.Headers[http.CanonicalHeaderKey(h.Name)] = append(out.Headers[http.CanonicalHeaderKey(h.Name)], h.Values...)
	}
	out.Query, _ = url.ParseQuery(req.Query) // what parses; the raw form is the host's to bound
	return out
}

// callbackAnswerToProto converts an answer, holding every field to its bound
// (the host checks again: a plugin need not use this SDK).
func callbackAnswerToProto(a CallbackAnswer) *providerv1.CallbackResponse {
	out := &providerv1.CallbackResponse{
		Updates:          make([]*providerv1.ReceiptUpdate, len(a.Updates)),
		ReplyStatus:      int32(a.ReplyStatus),
		ReplyContentType: CutText(a.ReplyContentType, 200),
	}
	if len(a.ReplyBody) <= MaxReplyBody {
		out.ReplyBody = a.ReplyBody
	}
	for i, u := range a.Updates {
		w := &providerv1.ReceiptUpdate{
			NotificationId: u.NotificationID,
			Outcome:        providerv1.ReceiptOutcome(u.Outcome),
			Detail:         CutText(u.Detail, MaxReceiptDetail),
			ProviderCode:   CutText(u.ProviderCode, MaxReceiptCode),
		}
		w.AtUnixNano = wire.UnixNano(u.At) // a provider's year 3000: no time, not a wrapped one
		out.Updates[i] = w
	}
	return out
}
