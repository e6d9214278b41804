package pluginhost_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
)

// hostAllocated is what the host (this test process; the plugin is another)
// allocated while f ran.
func hostAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A plugin describing itself with a 512 KiB name and version that begin with
// OSC 52 (a terminal's clipboard write), and 20,000 capabilities: every other
// text a plugin answers is cut at the wire, Describe's was kept whole for the
// life of the plugin, logged (its name differs from the file's) and shown on
// every dashboard channels page, and `notifyd plugins list` printed it raw.
// Cut at the wire now, its controls escaped.
func TestHost_DescribeBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "bigdescribe", rawPkg)
	p, err := b.host.Plugin(testenv.Context(t), "bigdescribe")
	if err != nil {
		t.Fatalf("Plugin(bigdescribe): %v", err)
	}
	info := p.Info()
	for what, s := range map[string]string{"name": info.Name, "version": info.Version} {
		if len(s) > 1024 {
			t.Errorf("Info().%s is %d bytes: a plugin's Describe text is not bounded", what, len(s))
		}
		if strings.ContainsAny(s, "\x1b\x07") {
			t.Errorf("Info().%s holds terminal controls raw (%.40q)", what, s)
		}
	}
	if n := len(info.Capabilities); n > 1024 {
		t.Errorf("Info().Capabilities has %d entries: not bounded", n)
	}
}

// A plugin answering each Send with 8 MiB of trailer metadata: gRPC's
// default lets a peer's headers and trailers reach 16 MiB, decoded in full
// before any of the host's bounds (the 1 KiB error text is cut after it),
// so each call in flight made the host allocate megabytes of the plugin's
// choosing. The host now takes at most 64 KiB of a call's metadata.
//
// Not parallel: it measures the process's allocations.
func TestHost_MetadataBounded(t *testing.T) {
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "bigmeta", rawPkg)
	ctx := testenv.Context(t)
	p, err := b.host.Plugin(ctx, "bigmeta")
	if err != nil {
		t.Fatalf("Plugin(bigmeta): %v", err)
	}
	if err := p.Configure(ctx, "ch", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	p.Send(ctx, msgs(`{}`)) // the first call's one-off allocations
	got := hostAllocated(func() {
		vs := p.Send(ctx, msgs(`{}`))
		t.Logf("verdict: %v %.200q", vs[0].Outcome, vs[0].Detail)
	})
	if got > 4<<20 {
		t.Errorf("one Send answered with 8 MiB of metadata made the host allocate %d MiB", got>>20)
	}
}

// A plugin answering the providers' health check with 40 MiB (a 1 MiB error
// for each of 40 channels): every call but Send could answer up to the
// protocol's 64 MiB, decoded in full before the host cut each error to
// 1 KiB — and Plugin.Health runs on every /readyz probe, which needs no
// token, and every dashboard page. The calls other than Send now take
// at most pluginhost's answer bound (2 MiB; a Send still 64 MiB).
//
// Not parallel: it measures the process's allocations.
func TestHost_HealthAnswerBounded(t *testing.T) {
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "bighealth", rawPkg)
	ctx := testenv.Context(t)
	p, err := b.host.Plugin(ctx, "bighealth")
	if err != nil {
		t.Fatalf("Plugin(bighealth): %v", err)
	}
	var herr error
	got := hostAllocated(func() {
		hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		herr = p.Health(hctx)
	})
	t.Logf("Health: %.300v", herr)
	if herr == nil {
		t.Error("Health: nil, want the plugin's answer refused or its errors")
	}
	if got > 16<<20 {
		t.Errorf("one Health call answered with 40 MiB made the host allocate %d MiB", got>>20)
	}
}
