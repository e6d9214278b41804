package pluginhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

const behavePkg = "./testdata/behave"

type bundle struct {
	dir  string
	cfg  config.Plugins
	host *pluginhost.Host
}

// setup installs the behave test plugin into a fresh plugins.dir and
// returns a host over it, closed when the test ends.
func setup(t testing.TB, tweak ...func(*config.Plugins)) *bundle {
	t.Helper()
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "behave", behavePkg)
	cfg := config.Plugins{Dir: dir, StartTimeout: 20 * time.Second, HealthInterval: time.Second}
	for _, f := range tweak {
		f(&cfg)
	}
	h := pluginhost.New(cfg, testLogger())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Stop(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &bundle{dir: dir, cfg: cfg, host: h}
}

func testLogger() hclog.Logger {
	out := io.Discard
	if testing.Verbose() {
		out = os.Stderr
	}
	return hclog.New(&hclog.LoggerOptions{Name: "test", Output: out, Level: hclog.Debug})
}

// behave launches the behave plugin with channel "ch" configured.
func (b *bundle) behave(t testing.TB) *pluginhost.Plugin {
	t.Helper()
	ctx := testenv.Context(t)
	p, err := b.host.Plugin(ctx, "behave")
	if err != nil {
		t.Fatalf("Plugin(behave): %v", err)
	}
	if err := p.Configure(ctx, "ch", json.RawMessage(`{"name":"ch"}`)); err != nil {
		t.Fatalf("Configure(ch): %v", err)
	}
	return p
}

func msgs(payloads ...string) []sdk.Message {
	ms := make([]sdk.Message, len(payloads))
	for i, p := range payloads {
		ms[i] = sdk.Message{ID: int64(i + 1), Channel: "ch", Recipient: "r", Payload: json.RawMessage(p), Attempt: 1, Deadline: time.Now().Add(5 * time.Second)}
	}
	return ms
}

func checkVerdicts(t *testing.T, vs []sdk.Verdict, want []sdk.Outcome, detail string) {
	t.Helper()
	if len(vs) != len(want) {
		t.Fatalf("got %d verdicts, want %d", len(vs), len(want))
	}
	for i := range want {
		if vs[i].Outcome != want[i] || !strings.Contains(vs[i].Detail, detail) {
			t.Errorf("verdict %d: got %v %q, want %v containing %q", i, vs[i].Outcome, vs[i].Detail, want[i], detail)
		}
	}
}

func TestHost_Discover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "junk", "./testdata/junk")
	for name, mode := range map[string]os.FileMode{"notifyd-plugin-readme": 0o644, "README.md": 0o755, "notifyd-plugin-": 0o755} {
		if err := os.WriteFile(filepath.Join(b.dir, name), []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
	}
	found, err := b.host.Discover()
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	var names []string
	for _, f := range found {
		names = append(names, f.Name)
		if f.Path != b.host.Path(f.Name) || len(f.SHA256) != 64 {
			t.Errorf("%s: got path %s sha %q, want %s and a hex SHA-256", f.Name, f.Path, f.SHA256, b.host.Path(f.Name))
		}
	}
	if got, want := strings.Join(names, ","), "behave,junk"; got != want {
		t.Errorf("Discover names: got %s, want %s (executables named notifyd-plugin-<name> only)", got, want)
	}

	t.Run("missing dir", func(t *testing.T) {
		missing := filepath.Join(b.dir, "nope")
		_, err := pluginhost.New(config.Plugins{Dir: missing}, nil).Discover()
		if want := fmt.Sprintf("plugins.dir %q: no such directory", missing); err == nil || err.Error() != want {
			t.Errorf("Discover(%s): got %v, want %s", missing, err, want)
		}
		// A channel's plugin, looked for in it: the file and the dir named.
		_, err = pluginhost.New(config.Plugins{Dir: missing}, nil).Plugin(context.Background(), "ghost")
		if want := fmt.Sprintf("no such plugin executable (looked for notifyd-plugin-ghost): plugins.dir %q: no such directory", missing); err == nil || !strings.HasSuffix(err.Error(), want) || !errors.Is(err, pluginhost.ErrNotFound) {
			t.Errorf("Plugin(ghost) in a missing dir: got %v, want ErrNotFound ending %s", err, want)
		}
	})
}

func TestHost_Plugin_StartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := testenv.InstallPlugin(t, dir, "behave", behavePkg)
	sum := sha256Of(t, good)
	testenv.InstallPlugin(t, dir, "junk", "./testdata/junk")
	testenv.InstallPlugin(t, dir, "wrongcookie", "./testdata/wrongcookie")
	if err := os.WriteFile(filepath.Join(dir, "notifyd-plugin-noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("ab", 32)

	tests := []struct {
		name      string
		plugin    string
		checksums map[string]string
		wantIs    error
		want      string
	}{
		{"missing binary", "ghost", nil, pluginhost.ErrNotFound, "looked for notifyd-plugin-ghost in plugins.dir"},
		{"not executable", "noexec", nil, nil, "not executable"},
		{"checksum mismatch", "behave", map[string]string{"behave": wrong}, pluginhost.ErrChecksum, "plugins.checksums.behave wants " + wrong},
		{"junk on stdout", "junk", nil, pluginhost.ErrHandshake, `wrote "hello from a chatty plugin" to stdout before the handshake`},
		{"wrong cookie", "wrongcookie", nil, pluginhost.ErrHandshake, "wrong handshake cookie"},
		{"invalid name", "../etc", nil, nil, "invalid name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := pluginhost.New(config.Plugins{Dir: dir, Checksums: tt.checksums, StartTimeout: 20 * time.Second}, testLogger())
			defer h.Stop(context.Background())
			p, err := h.Plugin(testenv.Context(t), tt.plugin)
			if err == nil {
				t.Fatalf("Plugin(%s): got a plugin (pid %d), want an error", tt.plugin, p.PID())
			}
			msg := err.Error()
			t.Log(msg)
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("got %v, want errors.Is %v", err, tt.wantIs)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("got %q, want it to contain %q", msg, tt.want)
			}
			if tt.name != "invalid name" && (!strings.Contains(msg, "plugin "+tt.plugin) || !strings.Contains(msg, h.Path(tt.plugin))) {
				t.Errorf("got %q, want it to name plugin %s and its path %s", msg, tt.plugin, h.Path(tt.plugin))
			}
		})
	}

	t.Run("matching checksum starts", func(t *testing.T) {
		t.Parallel()
		h := pluginhost.New(config.Plugins{Dir: dir, Checksums: map[string]string{"behave": strings.ToUpper(sum)}, StartTimeout: 20 * time.Second}, testLogger())
		defer h.Stop(context.Background())
		p, err := h.Plugin(testenv.Context(t), "behave")
		if err != nil {
			t.Fatalf("Plugin(behave) with its own checksum: %v", err)
		}
		if got := p.Info(); got.Name != "behave" || got.Version != "1.0.0" || got.MaxConcurrency != 16 {
			t.Errorf("Info: got %+v, want behave 1.0.0 with MaxConcurrency 16", got)
		}
	})
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	found, err := pluginhost.New(config.Plugins{Dir: filepath.Dir(path)}, nil).Discover()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if f.Path == path {
			return f.SHA256
		}
	}
	t.Fatalf("%s not discovered", path)
	return ""
}

func TestHost_Plugin_OneProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t)
	got := make(chan *pluginhost.Plugin, 4)
	for range cap(got) {
		go func() {
			p, err := b.host.Plugin(ctx, "behave")
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
	}
	first := <-got
	for range cap(got) - 1 {
		if p := <-got; p != first {
			t.Errorf("concurrent Plugin calls: got two plugins (pids %d, %d), want one shared", first.PID(), p.PID())
		}
	}
}

func TestHost_Close(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.behave(t)
	pid := p.PID()

	// A send in flight when Close starts is drained, not cut off.
	ms := msgs(`{}`, `{"hang":true}`)
	ms[0].Deadline = time.Now().Add(700 * time.Millisecond)
	ms[1].Deadline = ms[0].Deadline
	done := make(chan []sdk.Verdict)
	go func() { done <- p.Send(context.Background(), ms) }()
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.host.Stop(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	vs := <-done
	if vs[0].Outcome != sdk.OutcomeSuccess || vs[1].Outcome != sdk.OutcomeTransient || vs[1].Detail != sdk.DetailDeadline {
		t.Errorf("in-flight send: got %+v, want SUCCESS then TRANSIENT %q", vs, sdk.DetailDeadline)
	}
	checkVerdicts(t, p.Send(context.Background(), msgs(`{}`)), []sdk.Outcome{sdk.OutcomeTransient}, pluginhost.DetailShuttingDown)
	if alive(pid) {
		t.Errorf("plugin pid %d: still running after Close", pid)
	}
	if _, err := b.host.Plugin(ctx, "behave"); !errors.Is(err, pluginhost.ErrClosed) {
		t.Errorf("Plugin after Close: got %v, want ErrClosed", err)
	}
}
