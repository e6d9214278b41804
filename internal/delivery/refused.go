package delivery

import (
	"sync"

	"github.com/notifyd/notifyd/internal/outbox"
)

// A batched statement Postgres refuses for one row's data class
// (outbox.IsRowError: 22, 23, 54) is split until that row stands alone
// (claim.go, settle.go). Postgres refuses a row in other ways nobody lists:
// an operator's trigger that raises an exception (RAISE EXCEPTION is
// SQLSTATE P0001), a row-level security policy (42501). Such a refusal
// failed the whole batch on every try: one row held a settle worker for
// good, and with both held every channel's verdicts went uncommitted, or
// its batch-mates were never claimed. But the same classes also come from a
// statement no row can pass (a column a migration has not added yet: 42703),
// where splitting would end every row FAILED. So the class alone does not
// decide: a row of the batch that commits alone says the statement is
// fine, and the error is then the other rows' own.

// refusal is what the refused statement's rows may be at fault for.
type refusal int

const (
	// notRefused: Postgres could not run the statement now (unreachable,
	// out of resources, a rollback, a shutdown, a read-only standby): the
	// batch is tried again whole.
	notRefused refusal = iota
	// rowRefused: one row's data (outbox.IsRowError), or any refusal once a
	// row of the batch committed alone: the batch is split to find it.
	rowRefused
	// maybeRowRefused: refused for a reason of no data class; whether a row
	// is at fault is for a row committing alone to tell.
	maybeRowRefused
)

// refusedFor classifies err; isolating says a row of the batch it came from
// committed alone where the whole failed.
func refusedFor(err error, isolating bool) refusal {
	if outbox.IsRowError(err) {
		return rowRefused
	}
	// Postgres unable to run it now (outbox.IsRefusal: connection,
	// rollback, resources, shutdown, ...): a row committing alone
	// meanwhile proves nothing.
	if !outbox.IsRefusal(err) {
		return notRefused
	}
	if isolating {
		return rowRefused
	}
	return maybeRowRefused
}

// refusedAloneLimit is how many times in a row one row may be refused alone
// (refusedFor: maybeRowRefused with no batch-mate to commit alone) before
// it is ended as a row at fault is. Alone, nothing tells a row's refusal
// from a statement's, and tried again for good it held a settle worker, or
// was claimed or relayed again every second, without end. Three: a refusal
// that passes (an operator fixing a trigger) has two retries to, while a
// row's own refusal ends within seconds (the settle's pauses are 100 and
// 200 ms; the claim and the relay try again within a second or so).
// Failures of a class meaning Postgres cannot run statements now
// (notRefused) are not counted. Several rows refused together, each alone
// too, are not counted either: that is a statement no row can pass.
const refusedAloneLimit = 3

// maxRefusedAlone bounds the ids refusedAlone remembers: a row refused
// alone once and then gone from the queue (cancelled, acked by another
// instance) is never claimed again to be forgotten, so past this bound the
// counts start afresh.
const maxRefusedAlone = 1024

// refusedAlone counts the times in a row each id was refused alone: in a
// row meaning no other row was refused in between. Rows of a statement no
// row can pass reach it alone too — a fetch of one id, the rest of the
// queue taken by the fetch before, or batch_size 1 — and counted each on its
// own, every one was ended while the others were refused as well
// (rehearsal 66 ended one claim of ten so, all refused by a trigger). A
// row at fault amid rows that pass is refused alone time after time, and
// ended.
type refusedAlone struct {
	mu sync.Mutex
	n  map[int64]int
	// last is the row last refused alone, 0 after a refusal of several
	// rows together (refusedMany); ids are positive.
	last int64
}

// refused counts one refusal of id alone and reports whether it reached
// refusedAloneLimit (id is then forgotten: it is ended). A refusal of
// another row since id's last one starts its count afresh.
func (r *refusedAlone) refused(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil || len(r.n) >= maxRefusedAlone {
		r.n = map[int64]int{}
	}
	if r.last != id {
		delete(r.n, id) // others were refused meanwhile
	}
	r.last = id
	r.n[id]++
	if r.n[id] < refusedAloneLimit {
		return false
	}
	delete(r.n, id)
	return true
}

// refusedMany says a statement of several rows was refused with none of them
// committing alone: the statement, not one row; the next refusal alone
// counts afresh.
func (r *refusedAlone) refusedMany() {
	r.mu.Lock()
	r.last = 0
	r.mu.Unlock()
}

// passed forgets ids: they were written, so the next refusal starts afresh.
func (r *refusedAlone) passed(ids []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.n) == 0 {
		return
	}
	for _, id := range ids {
		delete(r.n, id)
	}
}

// forget forgets every id: the statement passed, so every count starts
// afresh (the relay's, whose refusals in a row end at any relay written).
func (r *refusedAlone) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n = nil
}
