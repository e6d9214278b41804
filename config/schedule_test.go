package config

import (
	"strings"
	"testing"
)

// schedule is a config with channel a and schedule s whose fields are
// fields (YAML flow-map entries).
func schedule(fields string) string {
	return minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, audience: {topic: t}, payload: {x: y}, " + fields + "}}\n"
}

// TestLoad_ScheduleLeadBounded: lead had no upper bound. A run is created
// and materialised (its audience read, its rows written PENDING) lead before
// its fire time, one run a tick: `lead: 100000h` on `@every 1s` created a
// run every second, each the whole audience, for 11 years ahead. At most
// MaxScheduleLead, named with the value.
func TestLoad_ScheduleLeadBounded(t *testing.T) {
	t.Parallel()
	err := loadErr(t, schedule(`cron: "@every 1s", lead: 100000h`), nil)
	if err == nil || !strings.Contains(err.Error(), `config key "schedules.s.lead"`) ||
		!strings.Contains(err.Error(), "100000h0m0s") || !strings.Contains(err.Error(), "24h0m0s") {
		t.Errorf("lead: 100000h: Load = %v; want an error naming schedules.s.lead, the value and the bound", err)
	}
	if err := loadErr(t, schedule(`cron: "0 8 * * *", lead: 24h`), nil); err != nil {
		t.Errorf("lead: 24h: %v; want it loaded (the bound itself)", err)
	}
}
