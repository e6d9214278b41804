package pluginhost_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/wire"
)

// A plugin answering a message with a 40 MiB result (Send), or streaming
// results of 40 MiB, or of 4 MiB each for 30 messages (each within what the
// outbox stores, 120 MiB in all). The outbox stores a note in place of a
// result past 4 MiB, but the verdict held the whole result until its settle
// — each message in flight or waiting for its commit up to 64 MiB of the
// plugin's choosing — and a stream has many answers, each up to gRPC's
// 64 MiB. The host takes each result within what the outbox stores, and a
// call's within the protocol's bound in all, and notes the rest in their
// place at the wire; every outcome stands.
func TestPlugin_ResultsBounded(t *testing.T) {
	t.Parallel()
	// Health checked every 10 s, not every second: a plugin encoding and
	// streaming 40 MiB results beside the whole suite missed two 1-s checks
	// in a row on a quiet-ish machine and three (replaced mid-call) on a
	// busy one. What this test is about is the results.
	b := setup(t, func(c *config.Plugins) { c.HealthInterval = 10 * time.Second })
	for _, tt := range []struct {
		name, mode string
		result     int // bytes, of each message's after the first (streambig)
		n          int
	}{
		{"Send, 40 MiB", "bigresult", 0, 1},
		{"SendEach, 40 MiB each", "streambig", 40 << 20, 3},
		{"SendEach, 4 MiB each, 120 MiB in all", "streambig", wire.MaxResultBytes, 31},
	} {
		if _, err := os.Stat(filepath.Join(b.dir, "notifyd-plugin-"+tt.mode)); err != nil {
			testenv.InstallPlugin(t, b.dir, tt.mode, rawPkg)
		}
		ctx := testenv.Context(t)
		p, err := b.host.Plugin(ctx, tt.mode)
		if err != nil {
			t.Fatalf("Plugin(%s): %v", tt.mode, err)
		}
		if err := p.Configure(ctx, "ch", json.RawMessage(`{}`)); err != nil {
			t.Fatalf("Configure: %v", err)
		}
		payloads := make([]string, tt.n)
		for i := range payloads {
			payloads[i] = fmt.Sprintf(`{"result":%d}`, tt.result)
		}
		ms := msgs(payloads...)
		for i := range ms {
			ms[i].Deadline = time.Now().Add(time.Minute)
		}
		var vs []sdk.Verdict
		if tt.mode == "bigresult" {
			vs = p.Send(ctx, ms)
		} else {
			vs, _ = sendEach(ctx, p, ms)
		}
		held, noted := 0, 0
		for i, v := range vs {
			if strings.Contains(string(v.Result), "notifyd_error") {
				noted++
			} else {
				held += len(v.Result)
			}
			if v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("%s: message %d: %v %.200q, want SUCCESS", tt.name, i, v.Outcome, v.Detail)
			}
			if len(v.Result) > wire.MaxResultBytes {
				t.Errorf("%s: message %d: a result of %d MiB reached the caller, over the %d MiB the outbox stores",
					tt.name, i, len(v.Result)>>20, wire.MaxResultBytes>>20)
			}
		}
		t.Logf("%s: %d MiB of results held, %d noted", tt.name, held>>20, noted)
		if held > providerv1.MaxMessageBytes {
			t.Errorf("%s: the call's results reached the caller whole, %d MiB, over the protocol's %d MiB a call", tt.name, held>>20, providerv1.MaxMessageBytes>>20)
		}
		if noted == 0 {
			t.Errorf("%s: no result noted", tt.name)
		}
	}
}
