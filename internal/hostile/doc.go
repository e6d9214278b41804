// Package hostile tries notifyd as a hostile client would, black-box: it
// builds notifyd and the webhook plugin, starts `notifyd serve` as a real
// process on its own schema and Redis prefix, and sends it
//
//   - the two reproductions of issue 16: a 3,200-character recipient (which
//     once jammed every settle) and a 138-byte campaign whose template
//     renders megabytes (which once crashed the daemon in a loop);
//   - a seeded stream of random and adversarial requests through the API
//     and the CLI: sizes at and past every bound, NUL bytes, invalid UTF-8
//     in bodies, paths and query strings, deep nesting, wrong types, unknown
//     channels, repeated idempotency keys, bad ids and filters.
//
// It asserts that no answer is a 5xx, that the daemon keeps its PID and a
// bounded memory, and that every notification it accepted reaches a final
// state (SENT, FAILED with a reason, CANCELLED) within a bound.
//
// A failure prints its seed; replay it with NOTIFYD_HOSTILE_SEED=<seed>
// go test ./internal/hostile -run TestHostile -v.
package hostile
