// Package hostile tries notifyd as a hostile client would, black-box: it
// builds notifyd and the webhook plugin, starts `notifyd serve` as a real
// process on its own Postgres schema, Redis prefix and loopback port, with
// one webhook channel on a receiver answering 200 ("hooks") and one on a
// receiver answering 400 ("refused", dead letters), and sends it
//
//   - the two reproductions of issue 16: a random 3,200-character recipient
//     (which once jammed every settle) through the API, a batch and the
//     CLI, a 10 KB subscriber address, and `notifyd cancel`; and the
//     138-byte campaign whose template renders megabytes (which once crashed
//     the daemon in a loop), over 200 and 2,000 elements;
//   - every bound at and just past it (recipient 1,024, idempotency key 512,
//     channel 200, payload 256 KiB, batch 1,000, pause reason 1,024,
//     subscriber id 256, address, attributes, topics, template size), each
//     with the answer it must get;
//   - a seeded stream of random and adversarial requests through the API
//     (written byte for byte, so raw NUL and invalid UTF-8 reach paths,
//     query strings and bodies) and the CLI: NUL bytes, invalid UTF-8,
//     lone surrogates, deep nesting, huge numbers, wrong types, unknown
//     channels, repeated idempotency keys, bad ids, filters and pauses;
//   - campaign templates past the issue's: huge ranges, a rendered NUL,
//     recursion, exponential recursion (only a render time limit stops it).
//
// It asserts that no answer is a 5xx or missing, that the daemon keeps its
// PID and stays under 1 GiB resident, that no job stays RUNNING or PENDING,
// and that every notification it accepted reaches a final state (SENT,
// FAILED with a reason, CANCELLED) within 60 s of the last request.
//
// The fuzz logs its seed; replay a run with
//
//	NOTIFYD_HOSTILE_SEED=<seed> go test ./internal/hostile -run TestHostile -v
//
// (-v also logs every edge request and the answer it got).
package hostile
