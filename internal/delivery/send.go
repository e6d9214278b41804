// Stage 3 of docs/design.md §4: a claimed batch through the provider, and
// the verdict turned into the outbox transition the settler commits.

package delivery

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/providerclient"
	"github.com/notifyd/notifyd/sdk/traceparent"
)

// send delivers one claimed batch through the plugin and hands the verdicts
// to the settler. A traced row's attempt span (trace.go) starts at claimedAt
// and travels with its verdict to the settle, which ends it. done, when not
// nil, is closed once every verdict is committed (sendSuspects waits for it).
//
// A batching plugin's batch is one call. A plain plugin's batch goes out in
// parts of up to concurrency messages (c.sending: one permit a message,
// concurrency in all; takePermits), each part a call of its own that frees
// each message's permit as the plugin answers it (streamer; else when the
// call returns) and its slot once its verdict is committed (so a crash
// resends at most the slots' worth); a channel claims messages ahead of what
// is in flight (Prefetch, ahead), so the next batches' fetches and
// claims overlap the sends instead of waiting for them. A part starts
// within the channel's timeout of claimedAt, the batch's claim, or is not
// sent at all, and has the whole timeout from its start (and answerGrace for
// its answer's trip back): so a claimed row's send ends within twice the
// timeout of its claim, and answerGrace, whatever it waited for a permit,
// which staleAfter relies on, and a wait never shortens a send (a
// loaded machine's slow call must not time out, and be sent again, because
// it queued first).
func (c *channel) send(ctx context.Context, batch []outbox.Claimed, claimedAt time.Time, done chan struct{}) {
	var wg *sync.WaitGroup
	if done != nil {
		// Two settle workers may commit the items apart, and a plain
		// plugin's parts settle apart: done closes when the last of them is
		// committed.
		wg = new(sync.WaitGroup)
		wg.Add(len(batch))
		go func() { wg.Wait(); close(done) }()
	}
	if c.sending == nil {
		c.sendPart(ctx, batch, claimedAt, wg)
		return
	}
	for rest := batch; len(rest) > 0; {
		k := c.takePermits(ctx, len(rest))
		if k == 0 {
			// Stopping before these had a permit: never sent, retried.
			c.notSent(rest, claimedAt, "not sent: notifyd stopped before a send slot was free", wg)
			return
		}
		part := rest[:k]
		if rest = rest[k:]; len(rest) == 0 {
			c.sendPart(ctx, part, claimedAt, wg)
			return
		}
		c.e.sendWG.Add(1)
		go func() {
			defer c.e.sendWG.Done()
			c.sendPart(ctx, part, claimedAt, wg)
		}()
	}
}

// sendPart is one plugin call for part of a claimed batch (all of it for a
// batching plugin); as the plugin answers (answered) it frees the messages'
// send permits and hands their verdicts to the settler, which frees their
// slots once it has committed them.
func (c *channel) sendPart(ctx context.Context, batch []outbox.Claimed, claimedAt time.Time, wg *sync.WaitGroup) {
	e := c.e
	started := e.now()
	deadline := started.Add(c.cfg.Timeout)
	if started.Sub(claimedAt) >= c.cfg.Timeout {
		// Waited for a permit the whole timeout (the channel's sends are
		// all hanging), or the claim itself took it (Postgres stalled): too
		// late to start within the claim's bound (staleAfter), and not the
		// provider's failure (the breaker does not hear of it).
		c.releaseSending(len(batch))
		c.notSent(batch, claimedAt, fmt.Sprintf("not sent: the channel's timeout (%s) had passed since its claim before a send slot was free", c.cfg.Timeout), wg)
		return
	}
	msgs := make([]sdk.Message, len(batch))
	var spans []trace.Span // nil unless tracing is on and a row is traced
	for i, cl := range batch {
		msgs[i] = sdk.Message{
			ID: cl.ID, Channel: c.name, Recipient: cl.Recipient, Payload: cl.Payload,
			Attempt: cl.Attempt, IdempotencyKey: cl.IdempotencyKey, CreatedAt: cl.CreatedAt, Deadline: deadline,
		}
		if e.tracer != nil && cl.TraceParent != "" {
			if spans == nil {
				spans = make([]trace.Span, len(batch))
			}
			spans[i] = c.startAttempt(&batch[i], claimedAt)
			msgs[i].TraceParent = traceparent.Format(spans[i].SpanContext())
		}
	}
	defaultKeys(msgs)
	sctx, cancel := context.WithDeadline(ctx, deadline.Add(answerGrace))
	if st, ok := c.plugin.(streamer); ok && !c.batching {
		// Each verdict settled, and its permit freed, as the plugin answers
		// it: a message its provider holds until the deadline no longer
		// holds its batch-mates' (a batching plugin's call answers at once).
		c.callPluginEach(sctx, st, msgs, func(idx []int, vs []sdk.Verdict) {
			c.answered(pick(batch, idx), vs, pick(spans, idx), started, claimedAt, wg)
		})
		cancel()
		c.called(started)
		return
	}
	verdicts := c.callPlugin(sctx, msgs)
	cancel()
	c.called(started)
	c.answered(batch, verdicts, spans, started, claimedAt, wg)
}

// answerGrace is how long past its messages' deadline a call's answer is
// waited for: a plugin gives every message its verdict by its deadline (the
// SDK does), and the answer then has its trip back to make. Waiting until
// the deadline alone took every answer given at it — the messages the
// plugin had delivered with it — for an unknown outcome, each sent again.
const answerGrace = time.Second

// called records a plugin call that started at started and has returned.
func (c *channel) called(started time.Time) {
	d := c.e.now().Sub(started)
	c.lastCall.Store(int64(max(d, 1)))
	c.e.metrics.SendDuration(c.name, d)
}

// pick is the elements of s at idx (nil for a nil s).
func pick[T any](s []T, idx []int) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = s[i]
	}
	return out
}

// answered takes the verdicts of batch — a part's messages, all of them or
// those its plugin answered together — the moment they are answered: it
// frees their send permits and hands them to the settler, which frees their
// slots once it has committed them. started is when their call started.
func (c *channel) answered(batch []outbox.Claimed, verdicts []sdk.Verdict, spans []trace.Span, started, claimedAt time.Time, wg *sync.WaitGroup) {
	e := c.e
	finished := e.now()
	c.releaseSending(len(batch))
	ids := claimedIDs(batch)
	if hookCrashed(e.hooks.AfterSend, c.name, ids) {
		abandonAttempts(spans...)
		c.release(c.slotsFor(len(batch)))
		if wg != nil {
			wg.Add(-len(batch))
		}
		return
	}
	if dead, n := c.pluginDied(batch, verdicts, spans, claimedAt, wg); n > 0 {
		if n == len(batch) {
			return
		}
		batch, verdicts, spans = keepAnswered(batch, verdicts, spans, dead)
	}
	items := make([]settleItem, len(batch))
	for i, cl := range batch {
		items[i] = settleItem{ch: c, s: c.settlement(cl, verdicts[i], started, finished), done: wg}
		if spans != nil {
			items[i].span = spans[i]
		}
	}
	// The slots stay taken until the settler has committed the verdicts
	// (releaseSlots): a slow commit holds the fetcher back instead of
	// letting sent-but-unrecorded messages pile up in the settle queue,
	// every one of which a crash would send again (design.md §4.4). A plain
	// plugin's message holds one; a batching plugin's call holds one, with
	// its last verdict.
	switch {
	case !c.batching:
		for i := range items {
			items[i].slots = 1
		}
		c.settling.Add(int64(len(items)))
	case len(items) > 0:
		items[len(items)-1].slots = 1
	}
	e.settler.add(items)
}

// pluginDied handles the messages whose plugin process died during their
// call (providerclient.DetailProcessExited): the process took each one's
// outcome with it, as a dying notifyd would, so they are not settled. They
// stay PROCESSING and go back to the queue, due when their claim is stale;
// claimed then, they are suspects (design.md §10) — sent through the lane,
// alone from their second crash, quarantined at delivery.quarantine_after —
// so a payload that kills its plugin goes out alone, not again with the
// batch-mates it would kill (each one retried, an attempt spent, FAILED at
// retry.max_attempts though no provider ever refused it). Their slots are
// freed now (a batching plugin's call slot, when the whole call died). It
// returns which died (nil when none did) and how many.
func (c *channel) pluginDied(batch []outbox.Claimed, verdicts []sdk.Verdict, spans []trace.Span,
	claimedAt time.Time, wg *sync.WaitGroup) ([]bool, int) {
	var dead []bool
	var ids []int64
	for i, v := range verdicts {
		if v.Outcome != sdk.OutcomeTransient || !strings.HasPrefix(v.Detail, providerclient.DetailProcessExited) {
			continue // a success is never sent again
		}
		if dead == nil {
			dead = make([]bool, len(verdicts))
		}
		dead[i] = true
		ids = append(ids, batch[i].ID)
		if spans != nil {
			abandonAttempts(spans[i])
		}
	}
	if len(ids) == 0 {
		return nil, 0
	}
	c.log.Warn("plugin died during a call: its messages go back as suspects once their claim is stale",
		"messages", len(ids), "stale_after", c.staleAfter())
	c.requeueAt(ids, claimedAt.Add(c.staleAfter()), "requeue after the plugin died")
	switch {
	case !c.batching:
		c.release(len(ids))
	case len(ids) == len(batch):
		c.release(c.slotsFor(len(batch)))
	}
	if wg != nil {
		wg.Add(-len(ids))
	}
	return dead, len(ids)
}

// keepAnswered is batch, verdicts and spans without the messages dead marks
// (pluginDied's).
func keepAnswered(batch []outbox.Claimed, verdicts []sdk.Verdict, spans []trace.Span, dead []bool) ([]outbox.Claimed, []sdk.Verdict, []trace.Span) {
	var kb []outbox.Claimed
	var kv []sdk.Verdict
	var ks []trace.Span
	for i, v := range verdicts {
		if dead[i] {
			continue
		}
		kb, kv = append(kb, batch[i]), append(kv, v)
		if spans != nil {
			ks = append(ks, spans[i])
		}
	}
	return kb, kv, ks
}

// takePermits takes the send permits of a plain plugin's next part:
// min(n, concurrency), waiting for the first, then up to permitGrace for the
// rest; after that it goes with those it has. A part is not cut down to the
// permits free at the instant it gets its first: a call's permits come back
// one by one as its answer arrives, and taking whatever was free then split
// the next batch into calls of a few messages, each paying a plugin call and
// a settle of its own (twice the plugin's CPU a notification, measured). Nor
// does it wait for a permit a slow message holds (a provider that takes its
// whole timeout): waiting for all of them held the rest of the channel's
// concurrency idle behind that one message. One part takes at a time
// (permitMu), so two parts each holding some permits never wait on each
// other. 0 when ctx ends first.
func (c *channel) takePermits(ctx context.Context, n int) int {
	c.permitMu.Lock()
	defer c.permitMu.Unlock()
	n = min(n, cap(c.sending))
	got := takeUpTo(ctx, c.sending, n)
	if got == 0 || got == n {
		return got
	}
	grace := time.NewTimer(permitGrace)
	defer grace.Stop()
	for got < n {
		select {
		case c.sending <- struct{}{}:
			got++
		case <-grace.C:
			return got
		case <-ctx.Done():
			c.releaseSending(got)
			return 0
		}
	}
	return got
}

// permitGrace is how long a part waits for the rest of its permits once it
// has one: a call's permits come back together, within microseconds of each
// other, or with the verdicts a plugin answers within its linger of each
// other (the SDK's SendStream, 20 ms); one a slow message holds is not
// waited for.
const permitGrace = 25 * time.Millisecond

func (c *channel) releaseSending(n int) {
	if c.sending == nil {
		return
	}
	for range n {
		<-c.sending
	}
}

// notSent settles claimed rows that never reached the plugin: a transient
// verdict, retried after the backoff like any other (the attempt is in the
// history with the reason), and their slots freed. The breaker does not
// hear of it: the provider was not asked.
func (c *channel) notSent(batch []outbox.Claimed, claimedAt time.Time, reason string, wg *sync.WaitGroup) {
	now := c.e.now()
	items := make([]settleItem, len(batch))
	for i, cl := range batch {
		v := sdk.Verdict{Outcome: sdk.OutcomeTransient, Detail: reason}
		items[i] = settleItem{ch: c, s: c.settlement(cl, v, claimedAt, now), done: wg}
	}
	c.release(c.slotsFor(len(batch)))
	c.e.settler.add(items)
}

// defaultKeyPrefix begins the idempotency key of a message whose
// notification has none: notifyd-<id>, stable across its attempts.
const defaultKeyPrefix = "notifyd-"

// defaultKeys gives each message without an idempotency key its default
// one. The keys of a batch are written back to back into one string and
// each is a part of it: one allocation a batch, not two a message
// (fmt.Sprintf's).
func defaultKeys(msgs []sdk.Message) {
	var buf []byte
	for i := range msgs {
		if msgs[i].IdempotencyKey == "" {
			if buf == nil {
				buf = make([]byte, 0, (len(defaultKeyPrefix)+12)*(len(msgs)-i))
			}
			buf = strconv.AppendInt(append(buf, defaultKeyPrefix...), msgs[i].ID, 10)
		}
	}
	if buf == nil {
		return
	}
	all := string(buf)
	var digits [20]byte
	for i := range msgs {
		if msgs[i].IdempotencyKey == "" {
			n := len(defaultKeyPrefix) + len(strconv.AppendInt(digits[:0], msgs[i].ID, 10))
			msgs[i].IdempotencyKey, all = all[:n], all[n:]
		}
	}
}

// maxCallBytes bounds the messages of one plugin call, half the protocol's
// message bound (the rest is headroom for the framing and the verdicts): a
// batch of large payloads goes out in several calls at once, so one
// notification's size can never fail its batch-mates' call. (For a batching
// plugin those calls share the batch's one send slot: a batch splits only
// past 32 MB.)
const maxCallBytes = providerv1.MaxMessageBytes / 2

// callParts splits msgs into calls of at most maxCallBytes: [start, end)
// of each, at least one.
func callParts(msgs []sdk.Message) [][2]int {
	var parts [][2]int
	start, size := 0, 0
	for i, m := range msgs {
		n := len(m.Payload) + len(m.Recipient) + len(m.IdempotencyKey) + len(m.TraceParent) + 128
		if size+n > maxCallBytes && i > start {
			parts = append(parts, [2]int{start, i})
			start, size = i, 0
		}
		size += n
	}
	return append(parts, [2]int{start, len(msgs)})
}

// callPlugin sends msgs in calls of at most maxCallBytes and returns their
// verdicts in order; each call's verdicts go to the breaker (observe).
func (c *channel) callPlugin(ctx context.Context, msgs []sdk.Message) []sdk.Verdict {
	parts := callParts(msgs)
	if len(parts) == 1 {
		return c.call(ctx, msgs)
	}
	verdicts := make([]sdk.Verdict, len(msgs))
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(verdicts[p[0]:p[1]], c.call(ctx, msgs[p[0]:p[1]]))
		}()
	}
	wg.Wait()
	return verdicts
}

// callPluginEach is callPlugin for a streaming provider: got is given each
// call's verdicts as the plugin answers them (idx: indexes into msgs), from
// the calls' goroutines at once when msgs goes out in several calls.
func (c *channel) callPluginEach(ctx context.Context, st streamer, msgs []sdk.Message, got func(idx []int, vs []sdk.Verdict)) {
	parts := callParts(msgs)
	call := func(p [2]int) {
		vs := make([]sdk.Verdict, p[1]-p[0])
		st.SendEach(ctx, msgs[p[0]:p[1]], func(idx []int, part []sdk.Verdict) {
			for k, i := range idx {
				vs[i] = part[k]
			}
			if p[0] > 0 {
				idx = slices.Clone(idx)
				for k := range idx {
					idx[k] += p[0]
				}
			}
			got(idx, part)
		})
		c.observe(context.WithoutCancel(ctx), vs)
	}
	if len(parts) == 1 {
		call(parts[0])
		return
	}
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Go(func() { call(p) })
	}
	wg.Wait()
}

// call is one plugin call; the breaker judges each (observe).
func (c *channel) call(ctx context.Context, msgs []sdk.Message) []sdk.Verdict {
	vs := c.plugin.Send(ctx, msgs)
	c.observe(context.WithoutCancel(ctx), vs)
	return vs
}

// settlement turns a verdict into the outbox transition: SENT, back to
// QUEUED after a backoff, or FAILED once permanent or out of attempts.
func (c *channel) settlement(cl outbox.Claimed, v sdk.Verdict, started, finished time.Time) outbox.Settlement {
	s := outbox.Settlement{
		ID: cl.ID, Attempt: cl.Attempt, ProviderCode: v.ProviderCode,
		StartedAt: started, FinishedAt: finished, Output: v.Result,
	}
	// A status is an HTTP-like code; anything else from a plugin (negative,
	// huge) is not stored as one, so it cannot fail the settle's batch.
	if v.ProviderStatus > 0 && v.ProviderStatus < 1000 {
		s.ProviderStatus = v.ProviderStatus
	}
	switch v.Outcome {
	case sdk.OutcomeSuccess, sdk.OutcomeTransient, sdk.OutcomePermanent:
		s.Outcome = v.Outcome.String()
	default:
		s.Outcome = outbox.OutcomeTransient
	}
	switch v.Outcome {
	case sdk.OutcomeSuccess:
		s.Result = outbox.ResultSent
	case sdk.OutcomePermanent:
		s.Result, s.Error = outbox.ResultFailed, describe(v)
	default: // transient, and anything unrecognised: retried, never dropped
		if c.policy.Exhausted(cl.Attempt) {
			s.Result = outbox.ResultFailed
			s.Error = fmt.Sprintf("gave up after %d attempts: %s", cl.Attempt, describe(v))
		} else {
			s.Result, s.Error = outbox.ResultRetry, describe(v)
			s.NextAttemptAt = finished.Add(c.policy.Delay(cl.Attempt, v.RetryAfter))
		}
	}
	return s
}

// describe is the last_error an operator reads.
func describe(v sdk.Verdict) string {
	msg := v.Detail
	if msg == "" {
		msg = v.Outcome.String()
	}
	// The status and code have their own columns in the attempt log; add
	// them to the message only when the plugin's detail does not say them.
	var extra []string
	if v.ProviderStatus != 0 && !strings.Contains(msg, strconv.Itoa(v.ProviderStatus)) {
		extra = append(extra, fmt.Sprintf("HTTP %d", v.ProviderStatus))
	}
	if v.ProviderCode != "" && !strings.Contains(msg, v.ProviderCode) {
		extra = append(extra, "code "+v.ProviderCode)
	}
	if len(extra) > 0 {
		msg += " (" + strings.Join(extra, ", ") + ")"
	}
	return printable(msg)
}

// printable keeps a provider's error text storable and readable: Postgres
// text refuses NUL, and control bytes from an error page help nobody.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			return -1
		}
		return r
	}, s)
}
