package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimal = `
postgres: {url: "postgres://127.0.0.1:5432/notifyd?sslmode=disable"}
redis:    {url: "redis://127.0.0.1:6379/0"}
`

func write(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "notifyd.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := Load(write(t, minimal+`
channels:
  quiz: {plugin: webhook, config: {url: "http://127.0.0.1:9/hook"}}
`), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Listen != "127.0.0.1:8080" {
		t.Errorf("http.listen = %q, want loopback default", cfg.HTTP.Listen)
	}
	if cfg.Plugins.MaxMemoryBytes != 1<<30 {
		t.Errorf("plugins.max_memory_bytes = %d, want 1 GiB", cfg.Plugins.MaxMemoryBytes)
	}
	ch := cfg.Channels["quiz"]
	if ch.Concurrency != DefaultConcurrency || ch.Retry.MaxAttempts != DefaultMaxAttempts || ch.Retry.Jitter != JitterFull {
		t.Errorf("channel defaults not filled: %+v", ch)
	}
	if got := ch.Config["url"]; got != "http://127.0.0.1:9/hook" {
		t.Errorf("channel config url = %v", got)
	}
}

func TestLoad_FullExample(t *testing.T) {
	t.Parallel()
	cfg, err := Load(write(t, minimal+`
plugins: {dir: ./bin/plugins}
http: {tokens: ["${TEST_TOKEN}"]}
log: {level: debug, format: json}
channels:
  daily-quiz:
    plugin: kakao
    config: {mode: friends, access_token: "a", nested: {deep: [1, 2]}}
    concurrency: 64
    retry: {max_attempts: 5, base: 1s, max: 16s, jitter: window}
schedules:
  daily-quiz:
    channel: daily-quiz
    cron: "0 8 * * *"
    timezone: Asia/Seoul
    audience: {topic: daily-quiz}
    payload: {object_type: text, text: "Today's quiz: {{.data.title}}"}
`), []string{"TEST_TOKEN=0123456789abcdef0123"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.HTTP.Tokens; len(got) != 1 || got[0] != "0123456789abcdef0123" {
		t.Errorf("tokens = %v, want the expanded variable", got)
	}
	ch := cfg.Channels["daily-quiz"]
	if ch.Retry.Max != 16*time.Second || ch.Retry.Jitter != JitterWindow || ch.Concurrency != 64 {
		t.Errorf("channel = %+v", ch)
	}
	s := cfg.Schedules["daily-quiz"]
	if s.Lead != DefaultScheduleLead || s.Timezone != "Asia/Seoul" {
		t.Errorf("schedule = %+v", s)
	}
}

func TestLoad_Env(t *testing.T) {
	t.Parallel()
	path := write(t, minimal+`
channels:
  daily-quiz: {plugin: webhook, config: {url: "http://127.0.0.1:9/a", retry_all_non_2xx: false, client_id: "1234"}}
`)
	cfg, err := Load(path, []string{
		"NOTIFYD_POSTGRES_URL=postgres://other:5432/db",
		"NOTIFYD_LOG_FORMAT=json",
		"NOTIFYD_SHUTDOWN_SOFT_TIMEOUT=3s",
		"NOTIFYD_CHANNELS_DAILY_QUIZ_CONCURRENCY=7",
		"NOTIFYD_CHANNELS_DAILY_QUIZ_RETRY_MAX_ATTEMPTS=9",
		"NOTIFYD_CHANNELS_DAILY_QUIZ_CONFIG_URL=http://127.0.0.1:9/b",
		"NOTIFYD_API_TOKEN=not-a-key-so-ignored",
		"NOTIFYD_CHANNELS_DAILY_QUIZ_CONFIG_RETRY_ALL_NON_2XX=true",
		"NOTIFYD_CHANNELS_DAILY_QUIZ_CONFIG_CLIENT_ID=5678",
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := cfg.Channels["daily-quiz"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"postgres.url", cfg.Postgres.URL, "postgres://other:5432/db"},
		{"log.format", cfg.Log.Format, "json"},
		{"shutdown.soft_timeout", cfg.Shutdown.SoftTimeout, 3 * time.Second},
		{"concurrency", ch.Concurrency, 7},
		{"retry.max_attempts", ch.Retry.MaxAttempts, 9},
		{"config.url", ch.Config["url"], "http://127.0.0.1:9/b"},
		{"config bool typed like the file's", ch.Config["retry_all_non_2xx"], true},
		{"config string stays a string", ch.Config["client_id"], "5678"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestLoad_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		env        []string
		wantKey    string
	}{
		{"unknown top-level key", minimal + "bogus: 1\n", nil, "bogus"},
		{"unknown channel key", minimal + "channels: {a: {plugin: webhook, concurency: 3}}\n", nil, "channels.a.concurency"},
		{"wrong type", minimal + "channels: {a: {plugin: webhook, concurrency: lots}}\n", nil, "concurrency"},
		{"missing postgres url", "redis: {url: \"redis://127.0.0.1:6379\"}\n", nil, "postgres.url"},
		{"bad redis scheme", "postgres: {url: \"postgres://x\"}\nredis: {url: \"http://x\"}\n", nil, "redis.url"},
		{"missing plugin", minimal + "channels: {a: {concurrency: 3}}\n", nil, "channels.a.plugin"},
		{"bad jitter", minimal + "channels: {a: {plugin: w, retry: {jitter: some}}}\n", nil, "channels.a.retry.jitter"},
		{"max below base", minimal + "channels: {a: {plugin: w, retry: {base: 10s, max: 1s}}}\n", nil, "channels.a.retry.max"},
		{"bad duration", minimal + "shutdown: {soft_timeout: soon}\n", nil, "soft_timeout"},
		{"unset variable", minimal + "http: {tokens: [\"${NOPE_NOT_SET}\"]}\n", nil, "http.tokens[0]"},
		{"short token", minimal + "http: {tokens: [\"short\"]}\n", nil, "http.tokens[0]"},
		{"bad log format", minimal + "log: {format: xml}\n", nil, "log.format"},
		{"bad cron", minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, cron: \"61 * * * *\", audience: {topic: t}, payload: {x: y}}}\n", nil, "schedules.s.cron"},
		// Before, these loaded: a day no month has never fired, and
		// robfig/cron ran @every under a second (or negative) every second.
		{"cron that never fires", minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, cron: \"0 0 31 2 *\", audience: {topic: t}, payload: {x: y}}}\n", nil, "schedules.s.cron"},
		{"every 1ns", minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, cron: \"@every 1ns\", audience: {topic: t}, payload: {x: y}}}\n", nil, "schedules.s.cron"},
		{"every negative", minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, cron: \"@every -1h\", audience: {topic: t}, payload: {x: y}}}\n", nil, "schedules.s.cron"},
		{"bad zone", minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, cron: \"0 8 * * *\", timezone: Mars/Olympus, audience: {topic: t}, payload: {x: y}}}\n", nil, "schedules.s.timezone"},
		{"schedule without channel", minimal + "schedules: {s: {channel: nope, cron: \"0 8 * * *\", audience: {topic: t}, payload: {x: y}}}\n", nil, "schedules.s.channel"},
		{"query without key", minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, cron: \"0 8 * * *\", audience: {query: \"select 1\"}, payload: {x: y}}}\n", nil, "schedules.s.audience.key"},
		{"bad env value", minimal, []string{"NOTIFYD_POSTGRES_MAX_CONNS=many"}, "max_conns"},
		{"bad channel name", minimal + "channels: {\"a b\": {plugin: w}}\n", nil, "channels.a b"},
		{"hook to an unknown channel", minimal + "channels: {a: {plugin: w, dead_letter_hook: {channel: pager, recipient: r}}}\n", nil, "channels.a.dead_letter_hook.channel"},
		{"hook to itself", minimal + "channels: {a: {plugin: w, dead_letter_hook: {channel: a, recipient: r}}}\n", nil, "channels.a.dead_letter_hook.channel"},
		{"chained hooks", minimal + "channels: {a: {plugin: w, dead_letter_hook: {channel: b, recipient: r}}, b: {plugin: w, dead_letter_hook: {channel: c, recipient: r}}, c: {plugin: w}}\n", nil, "channels.a.dead_letter_hook.channel"},
		{"hook without recipient", minimal + "channels: {a: {plugin: w, dead_letter_hook: {channel: b}}, b: {plugin: w}}\n", nil, "channels.a.dead_letter_hook.recipient"},
		{"hook recipient without channel", minimal + "channels: {a: {plugin: w, dead_letter_hook: {recipient: r}}}\n", nil, "channels.a.dead_letter_hook.channel"},
		{"hook batch too big", minimal + "channels: {a: {plugin: w, dead_letter_hook: {channel: b, recipient: r, batch: 501}}, b: {plugin: w}}\n", nil, "channels.a.dead_letter_hook.batch"},
		{"sample ratio above 1", minimal + "tracing: {enabled: true, sample_ratio: 1.5}\n", nil, "tracing.sample_ratio"},
		{"negative sample ratio", minimal, []string{"NOTIFYD_TRACING_SAMPLE_RATIO=-0.1"}, "tracing.sample_ratio"},
		{"unknown tracing key", minimal + "tracing: {endpoint: x}\n", nil, "tracing.endpoint"},
		{"plugin memory below 64 MiB", minimal + "plugins: {max_memory_bytes: 1000000}\n", nil, "plugins.max_memory_bytes"},
		{"plugin memory not a number", minimal, []string{"NOTIFYD_PLUGINS_MAX_MEMORY_BYTES=1GiB"}, "max_memory_bytes"},
		{"plugin CPU negative", minimal + "plugins: {max_cpu: -1}\n", nil, "plugins.max_cpu"},
		{"plugin CPU too small to run", minimal + "plugins: {max_cpu: 0.001}\n", nil, "plugins.max_cpu"},
		{"plugin CPU not a number", minimal + "plugins: {max_cpu: .nan}\n", nil, "plugins.max_cpu"},
		{"plugin CPU not a number (env)", minimal, []string{"NOTIFYD_PLUGINS_MAX_CPU=half"}, "max_cpu"},
		// The queue grants no longer lease: an instance would start and
		// fail every renewal.
		// An empty address listened on every interface.
		{"empty listen address", minimal, []string{"NOTIFYD_HTTP_LISTEN="}, "http.listen"},
		{"listen without a port", minimal + "http: {listen: \"127.0.0.1\"}\n", nil, "http.listen"},
		{"negative max_procs", minimal + "instance: {max_procs: -1}\n", nil, "instance.max_procs"},
		{"max_procs past the bound", minimal, []string{"NOTIFYD_INSTANCE_MAX_PROCS=5000"}, "instance.max_procs"},
		{"lease longer than an hour", minimal + "delivery: {lease_ttl: 2h}\n", nil, "delivery.lease_ttl"},
		{"content key too long", minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, cron: \"0 8 * * *\", audience: {topic: t}, payload: {x: y}, content_key: \"" + strings.Repeat("k", 201) + "\"}}\n", nil, "schedules.s.content_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := loadErr(t, tt.yaml, tt.env)
			if err == nil {
				t.Fatalf("Load succeeded, want an error naming %q", tt.wantKey)
			}
			if !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("error %q does not name %q", err, tt.wantKey)
			}
		})
	}
}

// A value where the schema has nested keys (channels written as a list, a
// section given a string) is named with the shape it takes, not with the
// decoder's "'channels[0][name]' expected a map or struct, got string".
func TestLoad_ShapeErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, yaml, want string }{
		{"channels as a list", minimal + "channels:\n  - name: hooks\n    plugin: webhook\n",
			"config key \"channels\": takes a map from each name to its settings, not a list; write it as\n  channels:\n    NAME:\n      plugin: …"},
		{"schedules as a number", minimal + "schedules: 3\n",
			"config key \"schedules\": takes a map from each name to its settings, not the value \"3\"; write it as\n  schedules:\n    NAME:\n      channel: …"},
		{"checksums as a list", minimal + "plugins: {checksums: [a, b]}\n",
			"config key \"plugins.checksums\": takes a map from each name to its settings, not a list; write it as\n  checksums:\n    NAME: …"},
		{"a section as a string", "postgres: localhost\n", "config key \"postgres\": takes nested keys (known: max_conns, url), not the value \"localhost\""},
		{"a plugin's config as a list", minimal + "channels: {a: {plugin: w, config: [1]}}\n", "config key \"channels.a.config\": takes nested keys (a map), not a list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := loadErr(t, tt.yaml, nil); err == nil || err.Error() != tt.want {
				t.Errorf("Load = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// An empty list where a map belongs is nothing, as the decoder always read
// it: a config with `channels: []` or a plugin's `config: []` still loads.
func TestLoad_EmptyListIsNothing(t *testing.T) {
	t.Parallel()
	for _, yaml := range []string{minimal + "channels: []\nschedules: []\n", minimal + "channels: {a: {plugin: w, config: []}}\n"} {
		if err := loadErr(t, yaml, nil); err != nil {
			t.Errorf("%q: %v; want it loaded", yaml, err)
		}
	}
}

func TestLoad_Tracing(t *testing.T) {
	t.Parallel()
	cfg, err := Load(write(t, minimal), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tracing.Enabled || cfg.Tracing.SampleRatio != DefaultSampleRatio {
		t.Errorf("tracing defaults = %+v, want off with sample_ratio %v", cfg.Tracing, DefaultSampleRatio)
	}
	cfg, err = Load(write(t, minimal+"tracing: {sample_ratio: 0}\n"), []string{"NOTIFYD_TRACING_ENABLED=true"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Tracing.Enabled || cfg.Tracing.SampleRatio != 0 {
		t.Errorf("tracing = %+v, want enabled by the environment with sample_ratio 0 from the file", cfg.Tracing)
	}
}

func TestLoad_MissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), []string{})
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("err = %v, want it to name the file", err)
	}
	var cerr *Error
	if errors.As(err, &cerr) {
		t.Errorf("a missing file is not a key error: %v", err)
	}
}

func TestChannel_Slots(t *testing.T) {
	for _, tc := range []struct {
		concurrency, batch int
		batches            bool
		want               int
	}{
		{16, 64, false, 16},     // messages in flight
		{16, 50, true, 16},      // calls in flight, 800 messages
		{10000, 1000, true, 10}, // 10,000 messages in flight at most
		{10000, 1000, false, 10000},
		{7, 1000, true, 7},
	} {
		ch := Channel{Concurrency: tc.concurrency, BatchSize: tc.batch}
		if got := ch.Slots(tc.batches); got != tc.want {
			t.Errorf("concurrency %d, batch_size %d, batching %v: Slots %d, want %d", tc.concurrency, tc.batch, tc.batches, got, tc.want)
		}
	}
}

// TestLoad_LongKeyNamedWithinBound: an error quotes a bad value within 64
// bytes, but named the key whole, twice for an unknown one: a 1 MiB key
// (unknown, or a channel or schedule name) made a 2 MiB error for the
// terminal and the log. The key is named within 256 bytes, cut with "…".
func TestLoad_LongKeyNamedWithinBound(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 1<<20)
	for name, yaml := range map[string]string{ // explicit keys (? k): a plain one is at most 1,024 characters
		"unknown key":   minimal + "? " + long + "\n: 1\n",
		"unknown field": minimal + "channels:\n  a:\n    plugin: w\n    ? " + long + "\n    : 1\n",
		"channel name":  minimal + "channels:\n  ? \"a " + long + "\"\n  : {plugin: w}\n",
		"schedule name": minimal + "channels: {a: {plugin: w}}\nschedules:\n  ? \"s " + long + "\"\n  : {channel: a, cron: \"0 8 * * *\", audience: {topic: t}, payload: {x: y}}\n",
	} {
		err := loadErr(t, yaml, nil)
		if err == nil || len(err.Error()) > 1024 || !strings.Contains(err.Error(), "kkkk…") {
			t.Errorf("%s: Load = %d bytes of error (%.200v); want the key named within its bound, cut with …", name, len(fmt.Sprint(err)), err)
		}
	}
}

// TestLoad_NotUTF8NamesTheLine: a file saved as Latin-1 (a é in a plugin's
// config, a schedule's payload) was refused with the YAML reader's
// "yaml: invalid leading UTF-8 octet" alone: no line, no key. The error
// names the line and column of the first byte that is not UTF-8.
func TestLoad_NotUTF8NamesTheLine(t *testing.T) {
	t.Parallel()
	err := loadErr(t, minimal+"channels:\n  a:\n    plugin: w\n    config: {name: \"caf\xe9\"}\n", nil)
	if err == nil || !strings.Contains(err.Error(), "line 7") || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("Load = %v; want an error naming line 7 and UTF-8", err)
	}
	if err != nil && strings.Contains(err.Error(), "\xe9") {
		t.Errorf("the error quotes the invalid byte raw: %q", err)
	}
}

// TestLoad_TokensBounded: every API request's bearer token is compared with
// every configured token (in constant time, so none is skipped), a bad
// token's as well: 800,000 tokens (what a 16 MiB file holds) made each
// request cost 6.4 ms of CPU before any throttle answered it. At most
// MaxTokens tokens, and as many trusted proxies.
func TestLoad_TokensBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(minimal + "http:\n  tokens:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "    - token-%016d\n", i)
	}
	err := loadErr(t, b.String(), nil)
	if err == nil || !strings.Contains(err.Error(), `config key "http.tokens"`) || !strings.Contains(err.Error(), "2000") || !strings.Contains(err.Error(), "1000") {
		t.Errorf("2,000 tokens: Load = %v; want an error naming http.tokens, the count and the bound", err)
	}
	// The same for http.trusted_proxies, which every connection's and
	// request's address is looked up in, one prefix after another.
	b.Reset()
	b.WriteString(minimal + "http:\n  trusted_proxies:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "    - 10.%d.%d.0/24\n", i/256, i%256)
	}
	err = loadErr(t, b.String(), nil)
	if err == nil || !strings.Contains(err.Error(), `config key "http.trusted_proxies"`) || !strings.Contains(err.Error(), "2000") {
		t.Errorf("2,000 trusted proxies: Load = %v; want an error naming http.trusted_proxies, the count and the bound", err)
	}
}

// TestLoad_LongValueQuotedWithinBound: a value the config names in its
// error was quoted whole: a 1 MiB cron made a 3 MiB error (the value, and
// robfig/cron's copies of it), a log.format, retry.jitter, http.listen,
// trusted proxy, callback header or channel name 1-2 MiB, on the terminal
// and in the log. A value is quoted within 64 bytes, and a reason within
// 2 KiB whatever it quotes.
func TestLoad_LongValueQuotedWithinBound(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("1", 1<<20)
	sched := func(fields string) string {
		return minimal + "channels: {a: {plugin: w}}\nschedules: {s: {channel: a, audience: {topic: t}, payload: {x: y}, " + fields + "}}\n"
	}
	for key, yaml := range map[string]string{
		"schedules.s.cron":                    sched(`cron: "0 8 * * ` + big + `"`),
		"schedules.s.channel":                 minimal + "schedules: {s: {channel: " + big + ", cron: \"0 8 * * *\", audience: {topic: t}, payload: {x: y}}}\n",
		"log.format":                          minimal + "log: {format: " + big + "}\n",
		"log.level":                           minimal + "log: {level: " + big + "}\n",
		"http.listen":                         minimal + "http: {listen: " + big + "}\n",
		"http.trusted_proxies[0]":             minimal + "http: {trusted_proxies: [" + big + "]}\n",
		"channels.a.retry.jitter":             minimal + "channels: {a: {plugin: w, retry: {jitter: " + big + "}}}\n",
		"channels.a.callback.header":          minimal + "channels: {a: {plugin: w, callback: {secret: 0123456789abcdef0, header: " + big + "}}}\n",
		"channels.a.dead_letter_hook.channel": minimal + "channels: {a: {plugin: w, dead_letter_hook: {channel: " + big + ", recipient: r}}}\n",
		"postgres":                            "postgres: " + big + "\n",
	} {
		err := loadErr(t, yaml, nil)
		if err == nil || !strings.HasPrefix(err.Error(), `config key "`+key+`"`) || len(err.Error()) > 2560 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s: Load = %.200s… (%d bytes); want an error naming %s within 2.5 KiB", key, err, n, key)
		}
	}
}
