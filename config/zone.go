package config

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// LoadZone is the time zone a config names (schedules.<name>.timezone, a
// cron's CRON_TZ= or TZ= prefix, channels.<c>.rate_limit.timezone): an IANA
// zone, the same on every machine. A name for the machine's own zone —
// `Local` (Go's name for it) or `localtime` (the zoneinfo link to
// /etc/localtime) — is refused: instances in different zones would each
// read it as their own, so a schedule fired at a different instant on each
// (each creating its run: subscribers sent twice) and a daily cap's day
// began at a different midnight.
func LoadZone(name string) (*time.Location, error) {
	if base := strings.ToLower(path.Base(strings.TrimSpace(name))); base == "local" || base == "localtime" {
		return nil, fmt.Errorf("%s is each machine's own time zone, which differs between machines (instances in different zones would fire or count days at different times): name the zone, such as Asia/Seoul or UTC", quote(name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %s (an IANA name, such as Asia/Seoul or UTC)", quote(name))
	}
	if loc == time.Local {
		return nil, fmt.Errorf("%s is each machine's own time zone: name the zone, such as Asia/Seoul or UTC", quote(name))
	}
	return loc, nil
}

// cronZone is the zone a cron's TZ= or CRON_TZ= prefix names (robfig/cron's
// form: the prefix, the name, a space, the schedule) and whether a space
// follows it; ok is false without a prefix.
func cronZone(spec string) (prefix, name string, spaced, ok bool) {
	for _, prefix := range []string{"TZ=", "CRON_TZ="} {
		if rest, found := strings.CutPrefix(spec, prefix); found {
			name, _, spaced = strings.Cut(rest, " ")
			return strings.TrimSuffix(prefix, "="), name, spaced, true
		}
	}
	return "", "", false, false
}
