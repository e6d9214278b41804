package ui

import (
	"fmt"
	"github.com/notifyd/notifyd/config"
	"html/template"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk/wire"
)

// quote is a request value quoted for a message, as %q does, after it is
// cut to wire.MaxQuotedValue bytes on a UTF-8 boundary (wire.Truncate, marked).
func quote(s string) string { return strconv.Quote(wire.Truncate(s, wire.MaxQuotedValue)) }

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"login", "error", "channels", "dead", "purge", "jobs", "lookup", "notification"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"ts":      timestamp,
		"ago":     ago,
		"dur":     humanDuration,
		"trunc":   truncate,
		"persec":  perSec,
		"deadURL": func(channel string, after int64) string { return deadURL(channel, strconv.FormatInt(after, 10)) },
		"deadPageURL": func(channel string, after int64, limit int) string {
			return deadPageURL(channel, strconv.FormatInt(after, 10), limit)
		},
		"lookupURL": lookupURL,
		"jobsURL":   jobsURL,
		"lower":     strings.ToLower,
		"inZone":    inZone,
		"plural":    plural,
		"chartW":    func() float64 { return chartW },
		"chartH":    func() float64 { return chartH },
		"seconds":   func(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Second))) },
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: parse template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// timestamp is t in UTC to the second, "—" for none.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// inZone is t in the IANA zone tz (a schedule's own), with the zone's
// abbreviation; in UTC for a zone config refuses (the machine's own, which a
// job row SQL wrote may name).
func inZone(t time.Time, tz string) string {
	if t.IsZero() {
		return "—"
	}
	loc, err := config.LoadZone(tz)
	if err != nil {
		return timestamp(t)
	}
	return t.In(loc).Format("2006-01-02 15:04 MST")
}

// ago is t relative to now: "5s ago", "in 3h", "—" for none.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + humanDuration(-d)
	}
	if d < time.Second {
		return "just now"
	}
	return humanDuration(d) + " ago"
}

// humanDuration rounds d to two units: "45s", "3m12s", "5h4m", "2d3h".
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// truncate cuts s to n runes, marking the cut. It walks s only as far as
// the cut and copies only what it keeps: a notification's page cuts 1,000
// attempts' errors of 4 KiB each, and a []rune of each was 16 KiB.
func truncate(n int, s string) string {
	i := 0
	for range n {
		if i >= len(s) {
			return s
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i >= len(s) {
		return s
	}
	if kept := s[:i]; !utf8.ValidString(kept) {
		return string([]rune(kept)) + "…" // each invalid byte a U+FFFD, as before
	}
	return s[:i] + "…"
}

// jobsURL is the jobs list filtered by kind and state at page before.
func jobsURL(kind, state string, before int64) string {
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	if state != "" {
		q.Set("state", state)
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	if len(q) == 0 {
		return "/ui/jobs"
	}
	return "/ui/jobs?" + q.Encode()
}

// plural picks one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
