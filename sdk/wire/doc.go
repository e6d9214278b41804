// Package wire is what both sides of notifyd's doors agree on: the HTTP API's
// JSON types, the notification statuses and error codes, and the bounds and
// text rules every entrance holds a notification to (docs/config.md,
// "Bounds"). It imports only the standard library, so the daemon (internal/api,
// internal/outbox), the HTTP client (sdk/client) and the transactional enqueue
// (sdk/txoutbox) share one definition without the client pulling in any of
// the daemon's dependencies (docs/design.md §1).
package wire
