package httpguard

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/notifyd/notifyd/sdk/wire"
)

// What a page of rows may read, as the outbox and the scheduler bound it: a
// page stops at the row that passes PageBytes (outbox.MaxPageBytes; a test
// holds them equal), so it holds at most PageBytes plus one row.
const (
	PageBytes = 16 << 20
	// NotificationBytes bounds one notification as a page reads it back:
	// its payload and result within their read bounds, its text columns,
	// and 200 bytes for the rest (outbox's row size).
	NotificationBytes = wire.MaxPayloadBytes + wire.MaxResultBytes + wire.MaxErrorLen +
		wire.MaxRecipientLen + wire.MaxIdempotencyKeyLen + wire.MaxChannelLen + 200
	// History is the most attempts a notification's GET reads
	// (outbox.MaxHistory; a test holds them equal).
	History = 1000
	// AttemptBytes bounds one attempt of the log as a GET reads it: its
	// error and provider code within the database's CHECKs, and 200 bytes
	// for its times, outcome and status.
	AttemptBytes = wire.MaxErrorLen + wire.MaxProviderCodeLen + 200
	// ReceiptBytes bounds a notification's receipt as a GET reads it: its
	// detail and code as Postgres cuts them (outbox.MaxReceiptDetail), and
	// room for the rest.
	ReceiptBytes = 1<<10 + wire.MaxProviderCodeLen + 200
	// NotificationGetBytes is what one notification read alone is charged
	// (GET /v1/notifications/{id}, the dashboard's notification page and
	// its look-ups by id and key, which read the same row): the row, its
	// latest History attempts and its receipt. About 9.3 MiB: a row of a
	// 1 MiB payload and a 4 MiB result with a full log read ~9 MiB, and its
	// answer is a second copy.
	NotificationGetBytes = NotificationBytes + History*AttemptBytes + ReceiptBytes
	// SummaryBytes is what one row of a list that shows summaries is
	// charged (the dashboard's dead letters and look-up by recipient,
	// outbox.Summary: no payload, result or attempt log): its channel,
	// recipient and cut error within the database's CHECKs, and 200 bytes
	// for the rest (outbox.SummaryBytes; a test holds them equal).
	SummaryBytes = wire.MaxChannelLen + wire.MaxRecipientLen + wire.MaxErrorLen + 200
	// DecodedJSON is how many bytes of Go values one byte of free-form JSON
	// (a map[string]any) may decode into: 128 KiB of `0, 0, …` is 3.4 MiB
	// live and 4.3 MiB allocated (27× and 33×), of `{}, {}, …` 21×.
	DecodedJSON = 34
	// JobBytes is what one job is charged, on a jobs page or alone: its
	// payload template, read back within 128 KiB
	// (schedule.MaxTemplateReadBytes) and handed over decoded
	// (wire.Job.Payload is a map[string]any: DecodedJSON times that), its
	// audience within 128 KiB, its error within 4 KiB, its cursor and names
	// within 1 KiB each (schedule's jobColumns), and room for the rest.
	// About 4.4 MiB.
	JobBytes = DecodedJSON*(128<<10) + 128<<10 + wire.MaxErrorLen + 8*(1<<10) + 4<<10
	// SubscriberBytes is what one subscriber read alone is charged (GET
	// /v1/subscribers/{id}): its addresses within 256 KiB as text, its
	// first 1,000 topics of at most 200 bytes (and a string header each),
	// its attributes within 128 KiB, its external id.
	SubscriberBytes = 256<<10 + 1000*(wire.MaxChannelLen+16) + 128<<10 + 4<<10
)

// PageCharge is what a page of at most limit rows of rowBytes each may hold:
// limit rows, and never more than PageBytes past its first.
func PageCharge(limit int, rowBytes int64) int64 {
	return min(int64(max(limit, 1))*rowBytes, PageBytes+rowBytes)
}

// JobsPageCharge is what a page of at most limit jobs is charged: limit
// jobs (JobBytes). Not capped at PageBytes as a page of notifications is:
// the scheduler stops a page at 16 MiB of text as read, ~128 jobs of 128 KiB
// templates, which decode into ~550 MiB. A page past the whole bound is
// read while no other answer is in flight (Answers).
func JobsPageCharge(limit int) int64 {
	return int64(max(limit, 1)) * JobBytes
}

// MaxCharge is the least share of the bound a client is given: a page of
// notifications at its read bound. (A jobs page may be charged more: it is
// read while its client holds nothing else.)
const MaxCharge = PageBytes + NotificationBytes

// Answers bounds the memory that answers built from rows hold at once: a
// dead-letter page reads up to PageBytes past its first row (about 21 MiB),
// one notification with its attempt log up to ~9 MiB, and an answer,
// encoded, is a second copy. Without a bound a token holder's 256
// connections (64 per address) of such pages held several GB. Each such
// request holds its read bound (PageCharge, NotificationGetBytes, …) from
// before it reads; once its answer is encoded it holds the encoded answer's
// size instead (Encoded: less for a page of small rows, more for text that
// JSON or HTML escapes) until it has been written; a request that cannot
// get its bytes within the bound's wait, or before its context ends, is
// answered 503 with Retry-After (Busy). Requests that read no row never
// wait for it.
//
// One client (PerClient: an address, as Proxies.ClientIP names it) may hold
// at most its share of the bound. An answer is held until the client has
// read it into the kernel's buffers, for up to the server's write timeout:
// without a share, three slow readers of big pages held the whole bound for
// a minute and every other reader got 503.
//
// The handler Wrap returns carries the bound in each request's context,
// where HoldAnswer finds it: the API's routes and the dashboard's pages
// (served under the API's handler) share one bound.
type Answers struct {
	sem    *semaphore.Weighted
	max    int64
	wait   time.Duration
	client func(*http.Request) string
	shares
}

// NewAnswers allows max bytes of answers in flight; a request waits at most
// wait for its share. Every client may hold all of it until PerClient says
// otherwise.
func NewAnswers(max int64, wait time.Duration) *Answers {
	return &Answers{sem: semaphore.NewWeighted(max), max: max, wait: wait, shares: newShares(max)}
}

// PerClient lets each client, as client names a request's, hold at most
// share bytes (at least MaxCharge, so that any one answer can be had; at
// most the whole bound), and returns a. Call it before Wrap.
func (a *Answers) PerClient(share int64, client func(*http.Request) string) *Answers {
	a.perClient, a.client = min(max(share, MaxCharge), a.max), client
	return a
}

// AnswerShare is a client's share of a bound on answers of total bytes:
// its share of the server's connections (ClientShare), and never less than
// the largest one answer (MaxCharge).
func AnswerShare(total int64, perClient, maxConns int) int64 {
	return min(max(ClientShare(total, perClient, maxConns), MaxCharge), total)
}

type answersKey struct{}

// answer is what one request holds of the bound.
type answer struct {
	a   *Answers
	ctx context.Context
	who string

	mu   sync.Mutex
	held int64
}

// Wrap carries a in the context of h's requests, and gives back what a
// request still holds when h returns.
func (a *Answers) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := &answer{a: a, ctx: r.Context()}
		if a.client != nil {
			q.who = a.client(r)
		}
		defer q.set(0)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), answersKey{}, q)))
	})
}

// HoldAnswer holds n more bytes of the bound on answers in flight that ctx
// carries (Answers.Wrap) for its request, at most the whole bound or the
// client's share; release gives back all the request holds (also given
// back when the request ends). When the bytes cannot be had within the
// bound's wait, or before ctx ends, the error is a *Busy naming the bound.
// A request already holding some is not made to wait for more (set).
// Without a bound on ctx it holds nothing.
func HoldAnswer(ctx context.Context, n int64) (release func(), err error) {
	q, ok := ctx.Value(answersKey{}).(*answer)
	if !ok {
		return func() {}, nil
	}
	q.mu.Lock()
	to := q.held + n
	q.mu.Unlock()
	if err := q.set(to); err != nil {
		return nil, err
	}
	return func() { _ = q.set(0) }, nil
}

// Encoded tells the bound that ctx's request has encoded its answer into n
// bytes, about to be written: a request that holds any of the bound
// (HoldAnswer) holds n from now on instead of its read bound — it gives
// back the rest, or takes what JSON's or HTML's escapes added if that is
// free at once (never waited for: see set), so an answer that exists is
// written. A request that holds nothing is not charged.
func Encoded(ctx context.Context, n int64) {
	q, ok := ctx.Value(answersKey{}).(*answer)
	if !ok {
		return
	}
	q.mu.Lock()
	holding := q.held > 0
	q.mu.Unlock()
	if holding {
		_ = q.set(max(n, 1)) // never refused while it holds: growth is tried, not waited for
	}
}

// Grow tells the bound that ctx's request, while it still holds its rows,
// has built n more bytes of its answer (a page rendered in steps): a
// request that holds any of the bound holds n more if they are free at
// once, and goes on with what it holds if not (never waited for while it
// holds its rows: see set). A request that holds nothing is not charged.
func Grow(ctx context.Context, n int64) {
	q, ok := ctx.Value(answersKey{}).(*answer)
	if !ok {
		return
	}
	q.mu.Lock()
	held := q.held
	q.mu.Unlock()
	if held > 0 {
		_ = q.set(held + n) // never refused while it holds: growth is tried, not waited for
	}
}

// set makes q hold to bytes: at most the client's share of them from its
// share, and at most the whole bound of them from the bound, so an answer
// larger than the share is built while its client has no other, and one
// larger than the bound while no other answer is in flight. It waits for
// more at most the bound's wait.
func (q *answer) set(to int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.a
	oldC, oldG := min(q.held, a.perClient), min(q.held, a.max)
	newC, newG := min(to, a.perClient), min(to, a.max)
	if newG < oldG {
		a.sem.Release(oldG - newG)
	}
	if newC < oldC {
		a.unhold(q.who, oldC-newC)
	}
	if newC <= oldC && newG <= oldG {
		q.held = to
		return nil
	}
	if q.held > 0 {
		// Growth while holding (Encoded, Grow) is taken when it is free
		// and never waited for: a request waiting for more while it holds
		// its read bound waits on others doing the same — two GETs of one
		// client, each holding half its share and waiting to grow by JSON's
		// escapes, both answered 503 after the wait. Not had, the request
		// goes on with what it holds: what it grows by is an answer built
		// on rows whose read bound it holds.
		if a.tryGrow(q.who, newC-oldC, newG-oldG) {
			q.held = to
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(q.ctx, a.wait)
	defer cancel()
	if newC > oldC {
		if err := a.hold(ctx, q.who, newC-oldC); err != nil {
			q.held = min(q.held, to)
			return a.busy()
		}
	}
	if newG > oldG {
		if err := a.sem.Acquire(ctx, newG-oldG); err != nil {
			if newC > oldC {
				a.unhold(q.who, newC-oldC)
			}
			q.held = min(q.held, to)
			return a.busy()
		}
	}
	q.held = to
	return nil
}

func (a *Answers) busy() error {
	share := ""
	if a.perClient < a.max {
		share = fmt.Sprintf(" (one client at most %d of them)", a.perClient)
	}
	return &Busy{RetryAfter: 1, Message: fmt.Sprintf(
		"too many pages are being answered at once: they hold the %d bytes of answers in flight this server allows%s; "+
			"retry in 1 s, or ask for a smaller page (limit)", a.max, share)}
}

// tryGrow reserves c more of who's share and g more of the bound if both
// are free now, or neither.
func (a *Answers) tryGrow(who string, c, g int64) bool {
	if c > 0 && !a.tryHold(who, c) {
		return false
	}
	if g > 0 && !a.sem.TryAcquire(g) {
		if c > 0 {
			a.unhold(who, c)
		}
		return false
	}
	return true
}

// Hold holds n bytes of the bound for no request in particular (a test's
// stand-in for answers in flight), at most the whole bound, as HoldAnswer
// does; release gives them back.
func (a *Answers) Hold(ctx context.Context, n int64) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	q := &answer{a: a, ctx: ctx, who: "\x00test"}
	if err := q.set(min(n, a.max)); err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { _ = q.set(0) }), nil
}

// Busy is a bound that stayed full for as long as a request may wait for
// it: answer 503 with Retry-After (seconds) and Message, which names the
// bound.
type Busy struct {
	RetryAfter int
	Message    string
}

func (b *Busy) Error() string { return b.Message }
