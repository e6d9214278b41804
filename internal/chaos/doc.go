// Package chaos is notifyd's fault-tolerance suite: it runs real notifyd
// processes (each with its webhook plugin) against a Postgres cluster and a
// Redis server of its own, reached through toxiproxy proxies embedded in the
// test process, delivering to a recording webhook sink. While it enqueues a
// steady stream of notifications, a fault schedule kills notifyd and plugin
// processes with SIGKILL, wipes and restarts Redis, restarts Postgres
// immediately (a crash and WAL recovery) and adds latency, stalls and
// connection resets on the network. Then it heals everything, waits for the
// pipeline to finish and checks docs/design.md's promise: every notification SENT
// (and seen by the sink) or FAILED where the sink refused it, none lost,
// nothing left in flight in Postgres or Redis, duplicates counted.
//
// With Setup.RedisCluster the Redis is a real 3-master Redis Cluster of the
// suite's own instead, each master behind its own proxy (the nodes announce
// the proxies' addresses), the channel spread over 4 partitions, and the
// Redis faults hit one master at a time.
//
// chaos_test.go runs it: TestChaos (one Redis server) and
// TestChaosRedisCluster, each in a short mode inside `go test ./...`, the
// full one with `make chaos` (CHAOSTEST picks the test).
// docs/reliability.md records the runs.
package chaos
