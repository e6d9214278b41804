package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Details the SDK writes into verdicts it makes itself.
const (
	DetailDeadline       = "deadline exceeded"
	DetailCanceled       = "send canceled by the host"
	DetailInvalidVerdict = "plugin returned an invalid verdict"
	DetailNotConfigured  = "channel is not configured in this plugin"
	DetailPanic          = "plugin panicked"
)

// maxDetail bounds a verdict's Detail: it is stored with the notification
// and shown to operators, and a provider may echo a whole error page.
const maxDetail = 2048

// maxProviderCode bounds a verdict's ProviderCode as the host stores it
// (wire.MaxProviderCodeLen).
const maxProviderCode = 256

// Send delivers a batch. Every message gets exactly one verdict by its own
// deadline, whatever the provider does: a Send that overruns, hangs or panics
// costs only its own message (TRANSIENT), never the batch or the process.
func (s *server) Send(ctx context.Context, req *providerv1.SendRequest) (*providerv1.SendResponse, error) {
	b := newBatch(ctx, req.Messages, false)
	defer b.release()
	s.dispatch(b)
	b.wait()
	// The verdicts in one block: one allocation a batch, not one a message.
	block := make([]providerv1.Verdict, len(b.vs))
	resp := &providerv1.SendResponse{Verdicts: make([]*providerv1.Verdict, len(b.vs))}
	for i, v := range b.vs {
		toProto(&block[i], v)
		resp.Verdicts[i] = &block[i]
	}
	fitAnswer(resp)
	return resp, nil
}

// SendStream is Send answering each verdict as it is known, a few at a
// time: a message its provider holds until its deadline no longer holds the
// verdicts of the messages sent with it — nor, in the host, their send
// slots, which a slow recipient in every batch kept for a timeout each.
// Verdicts known within answerLinger of each other go in one answer, so a
// call whose messages all answer at once is answered once, as Send is.
func (s *server) SendStream(req *providerv1.SendRequest, out providerv1.Provider_SendStreamServer) error {
	b := newBatch(out.Context(), req.Messages, true)
	defer b.release()
	// Dispatched beside the answers: fanOut waits for a free slot a message,
	// and the verdicts of those sent first go out meanwhile.
	go s.dispatch(b)
	a := answers{out: out, budget: maxAnswer}
	var ready []int
	timer := time.NewTimer(answerLinger)
	defer timer.Stop()
	for sent := 0; sent < len(b.ms); sent += len(ready) {
		ready = ready[:0]
		select {
		case i := <-b.settled:
			ready = append(ready, i)
		case <-out.Context().Done():
			return out.Context().Err()
		}
		timer.Reset(answerLinger)
	linger:
		for sent+len(ready) < len(b.ms) {
			select {
			case i := <-b.settled:
				ready = append(ready, i)
			case <-timer.C:
				break linger
			}
		}
		if err := a.send(b, ready); err != nil {
			return err
		}
	}
	return nil
}

// answerLinger is how long SendStream holds a known verdict for the others
// of its call, so that they go in one answer: what a slow message can add to
// its batch-mates' wait, and, at worst, one answer a call for each.
const answerLinger = 20 * time.Millisecond

// answers sends a SendStream call's verdicts, each answer within maxAnswer,
// and the results of the whole call within budget too, as Send's answer
// is (fitAnswer): a result past it goes as a note saying so, its outcome
// unchanged. The host holds a call's results until they are stored, and
// takes no more of them than that either.
type answers struct {
	out    providerv1.Provider_SendStreamServer
	budget int // result bytes left for the call
}

func (a *answers) send(b *batch, idx []int) error {
	block := make([]providerv1.Verdict, len(idx))
	ivs := make([]providerv1.IndexedVerdict, len(idx))
	p := &providerv1.SendProgress{}
	size := 0
	for k, i := range idx {
		w := &block[k]
		toProto(w, b.vs[i])
		if len(w.Result) > a.budget {
			w.Result = unfitNote(len(w.Result))
		}
		a.budget = max(0, a.budget-len(w.Result))
		n := len(w.Result) + len(w.Detail) + len(w.ProviderCode) + 64
		if size+n > maxAnswer && len(p.Verdicts) > 0 {
			if err := a.out.Send(p); err != nil {
				return err
			}
			p, size = &providerv1.SendProgress{}, 0
		}
		ivs[k] = providerv1.IndexedVerdict{Index: int32(i), Verdict: w}
		p.Verdicts = append(p.Verdicts, &ivs[k])
		size += n
	}
	return a.out.Send(p)
}

// dispatch starts every message of b: a BatchSender gets its channel's
// messages in one call, everything else fans out message by message under
// the concurrency limit. It returns once each has been started or settled.
func (s *server) dispatch(b *batch) {
	// Route by channel: a BatchSender gets its channel's messages in one
	// call, everything else fans out message by message.
	single := make([]int, 0, len(b.ms))
	batches := map[string][]int{}
	for i := range b.ms {
		ch := b.ms[i].Channel
		switch snd := s.sender(ch); {
		case snd == nil:
			// Transient, not permanent: the host configures every channel
			// before sending and replays configs after a restart, so this is
			// a host/plugin state mismatch the next attempt will not see —
			// never a reason to dead-letter the message.
			b.settle(i, Transient(DetailNotConfigured+": "+ch))
		case isBatchSender(snd):
			batches[ch] = append(batches[ch], i)
		default:
			single = append(single, i)
		}
	}
	for ch, idxs := range batches {
		go s.sendBatch(b, s.sender(ch).(BatchSender), idxs)
	}
	s.fanOut(b, single)
}

// maxAnswer bounds one Send answer: the protocol's bound on a message
// (providerv1.MaxMessageBytes, which gRPC enforces on both sides), less room
// for gRPC's framing.
const maxAnswer = providerv1.MaxMessageBytes - 64<<10

// fitAnswer holds resp to maxAnswer by replacing the largest results with a
// note saying so, outcomes untouched. Each result is within what the host
// stores (validate), but their sum is not: a call of 20 messages with a 4 MiB
// result each (embeddings) made an 80 MiB answer, which gRPC refused whole,
// and the host took every message of the call — delivered, each one — for
// an unknown outcome and sent it again. A result lost is a note in the
// outbox; a message sent twice cannot be taken back.
func fitAnswer(resp *providerv1.SendResponse) {
	// A sum of the verdicts' texts with room for their fields' framing: the
	// usual answer is far below the bound and is not measured further.
	bound := 0
	for _, v := range resp.Verdicts {
		bound += len(v.Result) + len(v.Detail) + len(v.ProviderCode) + 64
	}
	if bound <= maxAnswer {
		return
	}
	size := proto.Size(resp)
	if size <= maxAnswer {
		return
	}
	idx := make([]int, 0, len(resp.Verdicts))
	for i, v := range resp.Verdicts {
		if len(v.Result) > 0 {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return len(resp.Verdicts[idx[a]].Result) > len(resp.Verdicts[idx[b]].Result) })
	for _, i := range idx {
		if size <= maxAnswer {
			break
		}
		v := resp.Verdicts[i]
		note := unfitNote(len(v.Result))
		if len(note) >= len(v.Result) {
			continue
		}
		// An estimate never below the size: the length prefixes shrink too.
		size -= len(v.Result) - len(note)
		v.Result = note
	}
}

// unfitNote stands for a result of n bytes that did not fit its call's
// answer with the others.
func unfitNote(n int) []byte {
	return fmt.Appendf(nil, `{"notifyd_error":"the provider's result was %d bytes; with the other results of its call it did not fit the plugin's answer (%d bytes); not stored"}`,
		n, maxAnswer)
}

func isBatchSender(s Sender) bool { _, ok := s.(BatchSender); return ok }

// fanOut runs Send for each message under the concurrency limit. A slot is
// held while a call runs, hung calls included; a message still waiting for a
// slot when its deadline passes is settled without being sent.
func (s *server) fanOut(b *batch, idxs []int) {
	sem := make(chan struct{}, s.limit)
	for _, i := range idxs {
		if b.done(i) {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-b.ctxs[i].Done():
			continue // its deadline watcher settles it
		}
		s.run(sendJob{b: b, i: i, sem: sem})
	}
}

// sendJob is one message of a batch for a worker to send, holding a slot of
// sem. It is passed by value: a closure per message would be an allocation
// per message.
type sendJob struct {
	b   *batch
	i   int
	sem chan struct{}
}

// send sends the job's message and frees its slot; c is the worker's call
// record, holding the message's deadline while its Send runs.
func (s *server) send(j sendJob, c *call) {
	defer func() { <-j.sem }()
	b, i := j.b, j.i
	mctx := b.ctxs[i]
	if mctx.Err() != nil {
		return // expired while queued: never send after the deadline
	}
	snd := s.sender(b.ms[i].Channel)
	c.start(b.ms[i].Deadline)
	defer c.end()
	if b.ms[i].TraceParent == "" {
		b.settle(i, s.call(mctx, snd, b.ms[i]))
		return
	}
	ctx, span := s.tracing.start(mctx, &b.ms[i])
	v := s.call(ctx, snd, b.ms[i])
	b.settle(i, v)
	s.tracing.end(span, v)
}

// workerIdle is how long a worker goroutine waits for its next send before
// it exits.
const workerIdle = 10 * time.Second

// run sends j on a worker goroutine: one waiting for work if there is one,
// else a new one, which stays for more work until it has been idle for
// workerIdle. A send through an HTTP client grows a fresh goroutine's stack
// several times over (copied each time); a worker keeps its grown stack
// from one send to the next, which took stack growth out of the webhook
// plugin's profile (≈8% of its CPU in notifyd-bench).
func (s *server) run(j sendJob) {
	select {
	case s.idle <- j:
	default:
		go s.worker(j)
	}
}

func (s *server) worker(j sendJob) {
	c := s.running.add()
	defer s.running.remove(c)
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		s.send(j, c)
		t.Reset(workerIdle)
		select {
		case j = <-s.idle:
		case <-t.C:
			return
		}
	}
}

// call runs one Send, turning a panic into a TRANSIENT verdict.
func (s *server) call(ctx context.Context, snd Sender, m Message) (v Verdict) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("Send panicked", "channel", m.Channel, "id", m.ID, "panic", r, "stack", string(debug.Stack()))
			// Held to the bounds as any verdict: the panic's value may be
			// a provider's whole answer.
			v = validate(Transient(fmt.Sprintf("%s: %v", DetailPanic, r)))
		}
	}()
	return validate(snd.Send(ctx, m))
}

// sendBatch hands a channel's messages to its BatchSender in one call, with
// the latest of their deadlines; each message's own deadline still settles it
// on time.
func (s *server) sendBatch(b *batch, snd BatchSender, idxs []int) {
	// Never send a message whose deadline has already passed: its deadline
	// watcher settles it TRANSIENT, as fanOut does for single sends.
	live := idxs[:0:0]
	for _, i := range idxs {
		if !b.done(i) && b.ctxs[i].Err() == nil {
			live = append(live, i)
		}
	}
	if idxs = live; len(idxs) == 0 {
		return
	}
	ms := make([]Message, len(idxs))
	var latest time.Time
	bounded := true
	for k, i := range idxs {
		ms[k] = b.ms[i]
		d := b.ms[i].Deadline
		bounded = bounded && !d.IsZero()
		if d.After(latest) {
			latest = d
		}
	}
	ctx := b.ctx
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	// When the process exports spans, each traced message gets the SDK's
	// span as for a single Send, covering the whole SendBatch call, and its
	// TraceParent becomes that span's: what the plugin records or links per
	// message joins the message's trace under it.
	spans := s.tracing.startBatch(ctx, ms)
	c := s.running.add()
	if bounded {
		c.start(latest)
	}
	vs := func() (vs []Verdict) {
		defer s.running.remove(c)
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("SendBatch panicked", "channel", ms[0].Channel, "panic", r, "stack", string(debug.Stack()))
				// Formatted once for the call (validate cuts each copy):
				// once a message, a panic's long value was allocated
				// 1,000 times over.
				v := Transient(fmt.Sprintf("%s: %v", DetailPanic, r))
				vs = make([]Verdict, len(ms))
				for k := range vs {
					vs[k] = v
				}
			}
		}()
		return snd.SendBatch(ctx, ms)
	}()
	if len(vs) != len(ms) {
		s.log.Error("SendBatch returned the wrong number of verdicts", "channel", ms[0].Channel, "got", len(vs), "want", len(ms))
		v := Transient(fmt.Sprintf("%s: SendBatch returned %d verdicts for %d messages", DetailInvalidVerdict, len(vs), len(ms)))
		for k, i := range idxs {
			b.settle(i, v)
			s.tracing.end(spans[k], v)
		}
		return
	}
	for k, i := range idxs {
		v := validate(vs[k])
		b.settle(i, v)
		s.tracing.end(spans[k], v)
	}
}

// validate turns a verdict the host could not act on into a TRANSIENT one,
// and tidies what can be tidied without changing the outcome: a delivered
// message stays delivered even if its result is not JSON, since retrying it
// would deliver it twice.
func validate(v Verdict) Verdict {
	switch v.Outcome {
	case OutcomeSuccess, OutcomeTransient, OutcomePermanent:
	default:
		return Transient(fmt.Sprintf("%s (outcome %d)", DetailInvalidVerdict, int(v.Outcome)))
	}
	if v.RetryAfter < 0 {
		v.RetryAfter = 0
	}
	if len(v.Result) > wire.MaxResultBytes {
		// What the host would store instead (outbox cleanOutput), made
		// here: a result it does not store is not worth sending.
		v.Result = wire.OverResultNote(len(v.Result))
	}
	if len(v.Result) > 0 && !jsonValid(v.Result) {
		v.Result = nil
		v.Detail = joinDetail(v.Detail, "result dropped: not valid JSON")
	}
	// Valid UTF-8 first, then cut: truncate backs off only to a rune's start.
	v.Detail = truncate(wireText(v.Detail), maxDetail)
	v.ProviderCode = truncate(wireText(v.ProviderCode), maxProviderCode)
	return v
}

func jsonValid(b []byte) bool { return json.Valid(b) }

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// truncate cuts s to at most n bytes on a rune's start, for valid UTF-8
// (wireText): it backs off at most three bytes. (It used to drop a byte at a
// time until the rest was valid, which for text with an invalid byte early
// cut all of it after that byte, and cost a scan a byte.)
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// batch holds one Send call's messages and verdicts. Each verdict is
// settled exactly once, by whichever comes first: the provider's answer or
// the message's deadline.
type batch struct {
	ctx     context.Context
	ms      []Message
	ctxs    []context.Context
	vs      []Verdict
	claimed []atomic.Bool
	wg      sync.WaitGroup
	cleanup []func()
	// settled, for SendStream, receives each message's index once its
	// verdict is in vs (nil for Send).
	settled chan int
}

// newBatch readies a call's messages; streamed, each verdict's index is
// also sent on settled (SendStream), from before any deadline can settle one.
func newBatch(ctx context.Context, in []*providerv1.Message, streamed bool) *batch {
	b := &batch{
		ctx:     ctx,
		ms:      make([]Message, len(in)),
		ctxs:    make([]context.Context, len(in)),
		vs:      make([]Verdict, len(in)),
		claimed: make([]atomic.Bool, len(in)),
	}
	if streamed {
		b.settled = make(chan int, len(in))
	}
	b.wg.Add(len(in))
	// Messages of one batch nearly always share a deadline: one context and
	// one watcher per distinct deadline keeps the per-message cost low.
	groups := map[int64][]int{}
	for i, m := range in {
		b.ms[i] = fromProto(m)
		groups[m.DeadlineUnixNano] = append(groups[m.DeadlineUnixNano], i)
	}
	for ns, idxs := range groups {
		gctx, cancel := ctx, context.CancelFunc(func() {})
		if ns != 0 {
			gctx, cancel = context.WithDeadline(ctx, time.Unix(0, ns))
		}
		stop := context.AfterFunc(gctx, func() {
			detail := DetailDeadline
			if !errors.Is(gctx.Err(), context.DeadlineExceeded) {
				detail = DetailCanceled
			}
			for _, i := range idxs {
				b.settle(i, Transient(detail))
			}
		})
		for _, i := range idxs {
			b.ctxs[i] = gctx
		}
		b.cleanup = append(b.cleanup, func() { stop(); cancel() })
	}
	return b
}

// settle records v as message i's verdict unless it already has one.
func (b *batch) settle(i int, v Verdict) {
	if b.claimed[i].CompareAndSwap(false, true) {
		b.vs[i] = v
		if b.settled != nil {
			b.settled <- i // never blocks: room for every message, each once
		}
		b.wg.Done()
	}
}

func (b *batch) done(i int) bool { return b.claimed[i].Load() }

func (b *batch) wait() { b.wg.Wait() }

func (b *batch) release() {
	for _, f := range b.cleanup {
		f()
	}
}
