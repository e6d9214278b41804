package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/testenv"
)

func TestPluginsList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "hello", "../../examples/hello-provider")
	var out bytes.Buffer
	if err := pluginsList(testenv.Context(t), &out, config.Plugins{Dir: dir}, hclog.NewNullLogger()); err != nil {
		t.Fatalf("plugins list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("plugins list: got\n%s\nwant a header and one row", out.String())
	}
	f := strings.Fields(lines[1])
	if len(f) != 4 || f[0] != "hello" || f[1] != "1.0.0" || len(f[2]) != 64 || f[3] != filepath.Join(dir, "notifyd-plugin-hello") {
		t.Errorf("plugins list row: got %q, want hello 1.0.0 <sha256> <path>", lines[1])
	}

	t.Run("a plugin describing itself by another name is flagged", func(t *testing.T) {
		other := t.TempDir()
		testenv.InstallPlugin(t, other, "sms", "../../examples/hello-provider") // describes itself as hello
		var out bytes.Buffer
		if err := pluginsList(testenv.Context(t), &out, config.Plugins{Dir: other}, hclog.NewNullLogger()); err != nil {
			t.Fatalf("plugins list: %v", err)
		}
		if !strings.Contains(out.String(), `describes itself as "hello"`) || !strings.Contains(out.String(), "plugin: sms") {
			t.Errorf("got\n%s\nwant a warning that notifyd-plugin-sms describes itself as hello", out.String())
		}
	})

	t.Run("a checksum mismatch fails the listing", func(t *testing.T) {
		out.Reset()
		pc := config.Plugins{Dir: dir, Checksums: map[string]string{"hello": strings.Repeat("0", 64)}}
		err := pluginsList(testenv.Context(t), &out, pc, hclog.NewNullLogger())
		var ex *exitError
		if !errors.As(err, &ex) || ex.code != 1 || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Errorf("got %v, want exit 1 naming the checksum mismatch", err)
		}
		if !strings.Contains(out.String(), "hello  ?") {
			t.Errorf("got\n%s\nwant hello listed with version ?", out.String())
		}
	})
}

func TestPluginsCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "hello", "../../examples/hello-provider")
	path := filepath.Join(dir, "notifyd.yaml")
	yaml := `postgres: {url: "postgres://127.0.0.1:5432/notifyd"}
redis: {url: "redis://127.0.0.1:6379/0"}
plugins: {dir: ` + dir + `}
channels:
  good: {plugin: hello, config: {url: "http://127.0.0.1:1/hook"}}
  broken: {plugin: hello, config: {}}
  other: {plugin: webhook, config: {url: "http://127.0.0.1:1/"}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = pluginsCheck(testenv.Context(t), &buf, cfg, hclog.NewNullLogger(), "hello")
	got := buf.String()
	for _, want := range []string{
		"plugin hello: started hello 1.0.0",
		"channel broken: FAILED: plugin hello: channel broken: config rejected: config.url must be an http:// or https:// URL",
		"channel good: configured; one message per Send: concurrency 16 counts messages in flight, so a plugin call carries at most 16 (the smaller of batch_size 64 and concurrency); up to 64 more are claimed ahead of the sends (16 until a call has returned, or while calls take 5s, half the timeout, or more)",
		"health: ok",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plugins check output:\n%s\nwant a line with %q", got, want)
		}
	}
	if strings.Contains(got, "channel other") {
		t.Errorf("plugins check output:\n%s\nwant only channels that use hello", got)
	}
	var ex *exitError
	if !errors.As(err, &ex) || ex.code != 1 {
		t.Errorf("plugins check: got %v, want exit code 1 (one channel failed)", err)
	}
}

// A batching plugin's channel is reported with the rule that applies to it:
// its concurrency counts plugin calls, each of up to batch_size messages.
func TestPluginsCheck_Batching(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "batchhook", "../../internal/delivery/testdata/batchhook")
	path := filepath.Join(dir, "notifyd.yaml")
	yaml := `postgres: {url: "postgres://127.0.0.1:5432/notifyd"}
redis: {url: "redis://127.0.0.1:6379/0"}
plugins: {dir: ` + dir + `}
channels:
  bulk: {plugin: batchhook, batch_size: 50, config: {url: "http://127.0.0.1:1/"}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := pluginsCheck(testenv.Context(t), &buf, cfg, hclog.NewNullLogger(), "batchhook"); err != nil {
		t.Fatalf("plugins check: %v\n%s", err, buf.String())
	}
	want := "channel bulk: configured; batches (sdk.BatchSender): concurrency 16 counts plugin calls in flight, each of up to batch_size 50 messages"
	if got := buf.String(); !strings.Contains(got, want) {
		t.Errorf("plugins check output:\n%s\nwant a line with %q", got, want)
	}
}

// A plugin writes its own name and version, a refused config's reason and
// a failed health check's error, and any of them may hold terminal
// controls. plugins list and plugins check print them escaped, as all text
// the CLI did not write (printable); before, check printed a refused
// config's reason and a health error raw: OSC 52 wrote the operator's
// clipboard, CSI cleared the screen, \r overwrote the line.
func TestPlugins_ControlsEscaped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "hostile", "./testdata/hostileplugin")
	const shown = `\x1b]52;c;`

	var list bytes.Buffer
	if err := pluginsList(testenv.Context(t), &list, config.Plugins{Dir: dir}, hclog.NewNullLogger()); err != nil {
		t.Fatalf("plugins list: %v\n%q", err, list.String())
	}
	if hasControl(list.String()) {
		t.Errorf("plugins list printed the plugin's control characters raw:\n%q", list.String())
	}
	if !strings.Contains(list.String(), "1.0"+shown) {
		t.Errorf("plugins list does not show the plugin's version (escaped):\n%s", list.String())
	}

	path := filepath.Join(dir, "notifyd.yaml")
	yaml := `postgres: {url: "postgres://127.0.0.1:5432/notifyd"}
redis: {url: "redis://127.0.0.1:6379/0"}
plugins: {dir: ` + dir + `}
channels:
  good: {plugin: hostile, config: {}}
  refused: {plugin: hostile, config: {refuse: true}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var check bytes.Buffer
	err = pluginsCheck(testenv.Context(t), &check, cfg, hclog.NewNullLogger(), "hostile")
	got := check.String()
	var ex *exitError
	if !errors.As(err, &ex) || ex.code != 1 {
		t.Errorf("plugins check: got %v, want exit code 1 (a channel refused, health failed)", err)
	}
	if hasControl(got) {
		t.Errorf("plugins check printed the plugin's control characters raw:\n%q", got)
	}
	for _, want := range []string{
		"started hostile" + shown,
		"channel refused: FAILED: ",
		"refused" + shown,
		"health: FAILED: ",
		"unwell" + shown,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plugins check output:\n%s\nwant a line with %q", got, want)
		}
	}
}
