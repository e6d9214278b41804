// Package sdkcheck holds the tests of the SDK module (sdk/, a Go module of
// its own) that need what only the daemon's module has: the outbox schema
// that sdk/txoutbox writes into, and the dependency check that plugins and
// client applications built against the SDK link nothing of the daemon.
package sdkcheck
