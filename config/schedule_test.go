package config

import (
	"fmt"
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

// TestLoad_MachineTimeZoneRefused: `Local` (Go's name for the process's own
// zone) and `localtime` (the zoneinfo link to /etc/localtime) loaded, and
// meant each machine's own zone: instances in Seoul and in UTC put a daily
// schedule's 08:00 nine hours apart, so each created its own run and
// subscribers were sent the day's message twice; a per-recipient daily cap
// started its day at a different midnight on each. `CRON_TZ=Local` in a
// cron fell back, silently, to the timezone key. Each is refused naming the
// key, saying why, and suggesting a zone's name.
func TestLoad_MachineTimeZoneRefused(t *testing.T) {
	t.Parallel()
	for yaml, key := range map[string]string{
		schedule(`cron: "0 8 * * *", timezone: Local`):                                                  "schedules.s.timezone",
		schedule(`cron: "0 8 * * *", timezone: localtime`):                                              "schedules.s.timezone",
		schedule(`cron: "CRON_TZ=Local 0 8 * * *"`):                                                     "schedules.s.cron",
		schedule(`cron: "TZ=localtime 0 8 * * *", timezone: Asia/Seoul`):                                "schedules.s.cron",
		schedule(`cron: "CRON_TZ=Local @daily"`):                                                        "schedules.s.cron",
		minimal + "channels: {a: {plugin: w, rate_limit: {per_recipient_daily: 1, timezone: Local}}}\n": "channels.a.rate_limit.timezone",
	} {
		err := loadErr(t, yaml, nil)
		if err == nil || !strings.Contains(err.Error(), `config key "`+key+`"`) ||
			!strings.Contains(err.Error(), "machine") || !strings.Contains(err.Error(), "Asia/Seoul") {
			t.Errorf("%s: Load = %v; want an error naming %s, the machine's own zone, and a zone to name instead", strings.TrimPrefix(yaml, minimal), err, key)
		}
	}
	for _, zone := range []string{"Asia/Seoul", "UTC", "Etc/GMT+9", "America/New_York"} {
		if err := loadErr(t, schedule(`cron: "CRON_TZ=`+zone+` 0 8 * * *", timezone: `+zone), nil); err != nil {
			t.Errorf("zone %s: %v", zone, err)
		}
	}
}

// TestLoad_CronZoneWithoutSchedule: a cron of a zone prefix alone
// (`CRON_TZ=UTC`, `TZ=`: the schedule left out, or cut by a template's
// unset variable) made robfig/cron slice the spec at a space it does not
// have, and panic: `serve`, `notifyd config check` and Start crashed with a
// stack trace instead of naming the key. Now refused naming the key.
func TestLoad_CronZoneWithoutSchedule(t *testing.T) {
	t.Parallel()
	for _, cron := range []string{"CRON_TZ=UTC", "TZ=Asia/Seoul", "TZ=", "CRON_TZ=UTC\t0 8 * * *"} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = loadErr(t, schedule(`cron: "`+strings.ReplaceAll(cron, "\t", `\t`)+`"`), nil)
		}()
		if err == nil || !strings.HasPrefix(err.Error(), `config key "schedules.s.cron"`) {
			t.Errorf("cron %q: Load = %v; want an error naming schedules.s.cron", cron, err)
		}
	}
}
