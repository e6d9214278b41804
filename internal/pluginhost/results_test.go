package pluginhost_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// A plugin answering a message with a 40 MiB result. The outbox stores a
// note in place of a result past 4 MiB, but the verdict held the whole
// result until its settle: each message in flight or waiting for its commit
// up to 64 MiB of the plugin's choosing. The host notes it at the wire; the
// outcome stands.
func TestPlugin_ResultsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	testenv.InstallPlugin(t, b.dir, "bigresult", rawPkg)
	ctx := testenv.Context(t)
	p, err := b.host.Plugin(ctx, "bigresult")
	if err != nil {
		t.Fatalf("Plugin(bigresult): %v", err)
	}
	if err := p.Configure(ctx, "ch", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	v := p.Send(ctx, msgs(`{}`))[0]
	if v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("%v %.200q, want SUCCESS", v.Outcome, v.Detail)
	}
	if len(v.Result) > wire.MaxResultBytes || !strings.Contains(string(v.Result), "notifyd_error") {
		t.Errorf("a result of %d MiB (%.60q) reached the caller, want a note in place of what the outbox does not store", len(v.Result)>>20, v.Result)
	}
}
