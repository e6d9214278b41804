package config

import (
	"strings"
	"testing"
)

// TestLoad_IntervalFloors: the duration keys something loops on took any
// positive value. `health_interval: 1ms` asked every plugin for Health a
// thousand times a second, each answer given 1 ms: a busy machine's pause
// was a miss, three replaced the plugin and its in-flight sends were sent
// again; `lease_ttl: 2ns` made the renewal ticker's interval 0 (a panic at
// start), 1ms a renewal every 333 µs; the relay, promote, epoch, sweep,
// heartbeat, retention and dead-letter-hook loops became busy loops on
// Postgres or Redis; a rate_limit.per under a millisecond is 0 to the Redis
// bucket, which then grants every take (rate 1 per 500µs granted 1,000
// takes in 30 ms), and a breaker.cooldown under one opened the breaker
// until the moment it opened. Each is refused at load naming the key, the
// value and the floor.
func TestLoad_IntervalFloors(t *testing.T) {
	t.Parallel()
	for yaml, want := range map[string]string{
		"plugins: {health_interval: 1ms}\n":                                `config key "plugins.health_interval": 1ms is under 1s`,
		"delivery: {relay_interval: 1ns}\n":                                `config key "delivery.relay_interval": 1ns is under 100ms`,
		"delivery: {promote_interval: 1ms}\n":                              `config key "delivery.promote_interval": 1ms is under 10ms`,
		"delivery: {epoch_interval: 1ms}\n":                                `config key "delivery.epoch_interval": 1ms is under 100ms`,
		"delivery: {sweep_interval: 1ms}\n":                                `config key "delivery.sweep_interval": 1ms is under 1s`,
		"delivery: {lease_ttl: 2ns}\n":                                     `config key "delivery.lease_ttl": 2ns is under 2s`,
		"jobs: {heartbeat: 1ms}\n":                                         `config key "jobs.heartbeat": 1ms is under 1s`,
		"retention: {interval: 1ms}\n":                                     `config key "retention.interval": 1ms is under 1s`,
		"retention: {rescan: 1s}\n":                                        `config key "retention.rescan": 1s is under 1m0s`,
		"channels: {a: {plugin: w, breaker: {cooldown: 1ms}}}\n":           `config key "channels.a.breaker.cooldown": 1ms is under 1s`,
		"channels: {a: {plugin: w, rate_limit: {rate: 1, per: 500us}}}\n":  `config key "channels.a.rate_limit.per": 500µs is under 1ms`,
		"channels: {a: {plugin: w, rate_limit: {rate: 3, per: 1500us}}}\n": `config key "channels.a.rate_limit.per": 1.5ms is not a whole number of milliseconds`,
		"channels: {a: {plugin: w, dead_letter_hook: {channel: b, recipient: r, every: 1ns}}, b: {plugin: w}}\n": `config key "channels.a.dead_letter_hook.every": 1ns is under 100ms`,
	} {
		err := loadErr(t, minimal+yaml, nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: Load = %v\nwant it to begin %s", strings.TrimSpace(yaml), err, want)
		}
	}
	// The values other packages' tests set to run fast, and the floors
	// themselves, load.
	if err := loadErr(t, minimal+`
plugins: {health_interval: 1s}
delivery: {relay_interval: 100ms, promote_interval: 10ms, epoch_interval: 100ms, sweep_interval: 1s, sweep_after: 3s, lease_ttl: 2s, stall_after: 300ms}
jobs: {heartbeat: 1s, stuck_after: 6s}
retention: {interval: 1s, rescan: 1m}
channels:
  a: {plugin: w, breaker: {cooldown: 1s}, rate_limit: {rate: 1, per: 1ms}, dead_letter_hook: {channel: b, recipient: r, every: 100ms}}
  b: {plugin: w}
`, nil); err != nil {
		t.Errorf("the floors: %v", err)
	}
}
