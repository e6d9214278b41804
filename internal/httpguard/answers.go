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
	// JobBytes is what one job of a jobs page is charged: its payload
	// template and its audience read back within 128 KiB each
	// (schedule.MaxTemplateReadBytes), its error within 4 KiB, its cursor
	// and names within 1 KiB each (schedule's jobColumns), and room for
	// the rest.
	JobBytes = 2*(128<<10) + wire.MaxErrorLen + 8*(1<<10) + 4<<10
)

// PageCharge is what a page of at most limit rows of rowBytes each may hold:
// limit rows, and never more than PageBytes past its first.
func PageCharge(limit int, rowBytes int64) int64 {
	return min(int64(max(limit, 1))*rowBytes, PageBytes+rowBytes)
}

// Answers bounds the memory that answers built from pages of rows hold at
// once: a dead-letter page reads up to PageBytes past its first row (about
// 21 MiB), and its answer, encoded, is a second copy of it. Without a bound
// a token holder's 256 connections (64 per address) of such pages held
// several GB. Each such request holds its page's bound (PageCharge) from
// before it reads until it has answered; one that cannot get it within the
// bound's wait, or before its context ends, is answered 503 with
// Retry-After (Busy). Requests that read no page never wait for it.
//
// The handler Wrap returns carries the bound in each request's context,
// where HoldAnswer finds it: the API's routes and the dashboard's pages
// (served under the API's handler) share one bound.
type Answers struct {
	sem  *semaphore.Weighted
	max  int64
	wait time.Duration
}

// NewAnswers allows max bytes of answers in flight; a request waits at most
// wait for its share.
func NewAnswers(max int64, wait time.Duration) *Answers {
	return &Answers{sem: semaphore.NewWeighted(max), max: max, wait: wait}
}

type answersKey struct{}

// Wrap carries a in the context of h's requests.
func (a *Answers) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), answersKey{}, a)))
	})
}

// HoldAnswer holds n bytes of the bound on answers in flight that ctx
// carries (Answers.Wrap), as Answers.Hold does. Without a bound on ctx it
// holds nothing.
func HoldAnswer(ctx context.Context, n int64) (release func(), err error) {
	a, ok := ctx.Value(answersKey{}).(*Answers)
	if !ok {
		return func() {}, nil
	}
	return a.Hold(ctx, n)
}

// Hold holds n bytes of the bound, at most the whole bound: a page larger
// than it waits until it answers alone. release gives them back; call it
// once the answer is written. When the bytes cannot be had within the
// bound's wait, or before ctx ends, the error is a *Busy naming the bound.
func (a *Answers) Hold(ctx context.Context, n int64) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	n = min(n, a.max)
	wctx, cancel := context.WithTimeout(ctx, a.wait)
	defer cancel()
	if err := a.sem.Acquire(wctx, n); err != nil {
		return nil, &Busy{RetryAfter: 1, Message: fmt.Sprintf(
			"too many pages are being answered at once: they hold the %d bytes of answers in flight this server allows; "+
				"retry in 1 s, or ask for a smaller page (limit)", a.max)}
	}
	return sync.OnceFunc(func() { a.sem.Release(n) }), nil
}

// Busy is a bound that stayed full for as long as a request may wait for
// it: answer 503 with Retry-After (seconds) and Message, which names the
// bound.
type Busy struct {
	RetryAfter int
	Message    string
}

func (b *Busy) Error() string { return b.Message }
