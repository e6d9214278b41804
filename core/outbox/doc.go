// Package outbox is the Postgres outbox: the table of notifications that is
// the truth about every one of them, and the batched, state-guarded
// transitions that move them through PENDING → QUEUED → PROCESSING → SENT /
// FAILED / CANCELLED (DESIGN §2).
package outbox
