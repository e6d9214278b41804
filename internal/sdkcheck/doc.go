// Package sdkcheck holds the tests of the SDK module (sdk/, a Go module of
// its own) that need what only the daemon's module has: the outbox schema
// that sdk/txoutbox writes into; the dependency check that plugins and
// client applications built against the SDK link nothing of the daemon; and
// the check that the modules work from outside as README.md documents — an
// application embedding the daemon (importing its root package and the SDK
// only) and a plugin, each built in a module of its own set up with the
// documented steps, the application run against Postgres and Redis.
package sdkcheck
