// Package outbox is the Postgres outbox: the table of notifications that is
// the truth about every one of them, and the batched, state-guarded
// transitions that move them through PENDING → QUEUED → PROCESSING → SENT /
// FAILED / CANCELLED (docs/design.md §2).
//
// Every transition is one set-based statement over unnest/ANY arrays (a
// constant number of parameters for any batch size), guarded on the state
// the caller expects, so a late or repeated actor can never move a row
// backwards or out of a terminal state:
//
//	Insert          → PENDING (idempotency key honoured; usable inside an application's own transaction)
//	Relay           PENDING, due             → QUEUED      (FOR UPDATE SKIP LOCKED)
//	Claim           QUEUED due / PROCESSING stale → PROCESSING, attempts+1 (the settle token)
//	Settle          PROCESSING with the token → SENT | QUEUED (retry) | FAILED, + attempt log
//	Cancel          PENDING/QUEUED           → CANCELLED
//	Replay          FAILED                   → QUEUED, attempts reset
//	PurgeFailed     FAILED                   → deleted
//
// Sweep, Get, ListFailed and CountByStatus only read. Listen wakes the relay
// when rows are inserted: a statement-level trigger sends a NOTIFY while the
// relay is idle (Relay keeps that flag; see Relay and 00001_outbox.sql).
package outbox
