package pluginhost_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// rawPkg is the test plugin that speaks the protocol without the SDK.
const rawPkg = "./testdata/rawplugin"

// A plugin that answers Send with a gRPC error whose message is 2 MiB: the
// verdicts the host made of it carried the plugin's words whole, 2 MiB a
// message, into the engine and the log (a verdict's own detail is cut at
// the wire). Every error a plugin answers is cut to
// providerclient.MaxErrorText now.
func TestHost_ErrorTextBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "bigerr", rawPkg)
	ctx := testenv.Context(t)
	p, err := b.host.Plugin(ctx, "bigerr")
	if err != nil {
		t.Fatalf("Plugin(bigerr): %v", err)
	}
	if err := p.Configure(ctx, "ch", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	vs := p.Send(ctx, msgs(`{}`, `{}`))
	for i, v := range vs {
		if len(v.Detail) > wire.MaxErrorLen {
			t.Errorf("verdict %d: detail is %d bytes (%.60q…), over the outbox's %d: the plugin's gRPC error text is not cut at the wire",
				i, len(v.Detail), v.Detail, wire.MaxErrorLen)
		}
	}
}

// A provider whose health check fails with a 1 MiB error (an error page,
// say): Plugin.Health's error went whole to /readyz's log line on every
// probe and to the dashboard's channels page. Cut by the SDK and again by
// the host.
func TestHost_HealthTextBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t)
	p, err := b.host.Plugin(ctx, "behave")
	if err != nil {
		t.Fatalf("Plugin(behave): %v", err)
	}
	cfg, _ := json.Marshal(map[string]string{"name": "ch", "health": strings.Repeat("H", 1<<20)})
	if err := p.Configure(ctx, "ch", cfg); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = p.Health(hctx)
	if err == nil {
		t.Fatal("Health: nil, want the provider's error")
	}
	if n := len(err.Error()); n > 8<<10 {
		t.Errorf("Health error is %d bytes: a plugin's health text is not bounded", n)
	}
}

// A plugin whose health answer reports 2,000 channels it was never given, a
// 1 KiB error each: each channel's text was cut to 1 KiB, but the channels
// were taken up to 1,024 of them, so Plugin.Health's error — on every
// dashboard page, and in the log of every /readyz check — was a megabyte of
// the plugin's words. Only the channels the host gave it are reported now.
func TestHost_HealthOfChannelsNotGiven(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "manyhealth", rawPkg)
	ctx := testenv.Context(t)
	p, err := b.host.Plugin(ctx, "manyhealth")
	if err != nil {
		t.Fatalf("Plugin(manyhealth): %v", err)
	}
	if err := p.Configure(ctx, "ch", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Health(hctx); err != nil {
		t.Errorf("Health: %d bytes (%.200q…); want nil: its channel ch is healthy, the rest are none of the host's", len(err.Error()), err)
	}
}

// A plugin that announces go-plugin broker connections to the host as fast
// as it can. The host never asks for one, yet go-plugin's client broker kept
// a goroutine and a 5 s timer for each announcement: 54,772 more goroutines
// and 113 MiB of stack within 4 s. The host refuses the broker stream now.
func TestHost_BrokerRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "brokerflood", rawPkg)
	ctx := testenv.Context(t)
	before := runtime.NumGoroutine()
	if _, err := b.host.Plugin(ctx, "brokerflood"); err != nil {
		t.Fatalf("Plugin(brokerflood): %v", err)
	}
	peak := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, runtime.NumGoroutine()-before)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("goroutines: %d more at the peak; stack in use %d MiB, heap in use %d MiB", peak, ms.StackInuse>>20, ms.HeapInuse>>20)
	if peak > 1000 { // a plugin costs the host a few dozen
		t.Errorf("the plugin made the host hold %d more goroutines: its broker announcements are not bounded", peak)
	}
}

// A plugin serving two channels is killed, and on its restart refuses
// channel a's config — its provider checks credentials at Configure. Only
// that channel stops (docs/design.md §7); b is served by the new process.
// Before: an SDK plugin's refusal in Latin-1 could not be marshalled (an
// Internal error, not a refusal), and any such error failed the whole
// restart, every channel of the plugin down for good. Now the SDK sends
// valid UTF-8, and the host takes any error the process answers a replayed
// Configure with as that channel's refusal (raw: a plugin not on the SDK).
func TestHost_ConfigRefusedAfterRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, plugin, pkg, want string }{
		{"sdk, in Latin-1", "behave", "", "cl\uFFFD d'API refus\uFFFDe"},
		{"raw, a gRPC error", "cfgerr", rawPkg, "configure exploded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if c.pkg != "" {
				testenv.InstallPlugin(t, b.dir, c.plugin, c.pkg)
			}
			ctx := testenv.Context(t)
			p, err := b.host.Plugin(ctx, c.plugin)
			if err != nil {
				t.Fatalf("Plugin(%s): %v", c.plugin, err)
			}
			marker := filepath.Join(t.TempDir(), "refuse")
			cfgA, _ := json.Marshal(map[string]string{"name": "a", "refuse": marker})
			if err := p.Configure(ctx, "a", cfgA); err != nil {
				t.Fatalf("Configure(a): %v", err)
			}
			if err := p.Configure(ctx, "b", json.RawMessage(`{"name":"b"}`)); err != nil {
				t.Fatalf("Configure(b): %v", err)
			}
			if err := os.WriteFile(marker, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var vs []sdk.Verdict
			for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				ms := msgs(`{}`)
				ms[0].Channel = "b"
				ms[0].Deadline = time.Now().Add(5 * time.Second)
				if vs = p.Send(ctx, ms); vs[0].Outcome == sdk.OutcomeSuccess {
					break
				}
			}
			if vs[0].Outcome != sdk.OutcomeSuccess {
				t.Fatalf("channel b not served a minute after the kill (restarts %d): %v %q; one channel's refusal kept the whole plugin down",
					p.Restarts(), vs[0].Outcome, vs[0].Detail)
			}
			ms := msgs(`{}`)
			ms[0].Channel = "a"
			ms[0].Deadline = time.Now().Add(5 * time.Second)
			if v := p.Send(ctx, ms)[0]; v.Outcome == sdk.OutcomeSuccess || !strings.Contains(v.Detail, c.want) {
				t.Errorf("channel a after the restart: %v %q; want it refused with %q", v.Outcome, v.Detail, c.want)
			}
		})
	}
}
