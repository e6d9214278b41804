package pluginhost_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

// sendEach is SendEach's verdicts by message, and how many times got was
// given each (it must be once).
func sendEach(ctx context.Context, p *pluginhost.Plugin, ms []sdk.Message) ([]sdk.Verdict, []int) {
	vs, times := make([]sdk.Verdict, len(ms)), make([]int, len(ms))
	p.SendEach(ctx, ms, func(idx []int, got []sdk.Verdict) {
		for k, i := range idx {
			vs[i] = got[k]
			times[i]++
		}
	})
	return vs, times
}

// An SDK plugin answers each verdict as it is known: the message whose
// provider holds it (behave's {"wait": file}) does not hold its batch-mates',
// which reach the caller while it is still held. (The engine then settles
// them and frees their send permits: delivery
// TestEngine_SlowMessageHoldsNoBatchMate.)
func TestPlugin_SendEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.behave(t)
	ctx := testenv.Context(t)
	release := filepath.Join(t.TempDir(), "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) })
	wait, _ := json.Marshal(map[string]string{"wait": release})
	ms := msgs(`{}`, string(wait), `{}`, `{"fail":"no"}`)
	for i := range ms {
		ms[i].Deadline = time.Now().Add(time.Minute)
	}
	fast := make(chan struct{})
	done := make(chan struct{})
	vs, times := make([]sdk.Verdict, len(ms)), make([]int, len(ms))
	go func() {
		defer close(done)
		answered := 0
		p.SendEach(ctx, ms, func(idx []int, got []sdk.Verdict) {
			for k, i := range idx {
				vs[i] = got[k]
				times[i]++
			}
			if answered += len(idx); answered == len(ms)-1 {
				close(fast)
			}
		})
	}()
	select {
	case <-fast:
	case <-done:
		t.Fatal("SendEach returned before the held message was released")
	case <-time.After(30 * time.Second):
		t.Fatal("the held message's batch-mates were not answered while it was held")
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	<-done
	checkVerdicts(t, vs, []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeSuccess, sdk.OutcomeSuccess, sdk.OutcomePermanent}, "")
	for i, n := range times {
		if n != 1 {
			t.Errorf("message %d answered %d times, want once", i, n)
		}
	}
}

// A plugin breaking SendStream's contract: a verdict for a message it was
// not sent, a message answered twice (a success, then a refusal), a stream
// that ends with messages unanswered, answers without a verdict sent as fast
// as it can, a stream held open once everything is answered. What it
// answered first stands, once; every other message has an unknown outcome
// (TRANSIENT, sent again with its key) naming what was wrong; the call ends
// at once, not at its deadline.
func TestPlugin_SendEach_ContractBroken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tt := range []struct {
		mode string
		want []sdk.Outcome
		why  string
	}{
		{"streamstray", []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeTransient, sdk.OutcomeTransient}, "answered message 99, which it was not sent"},
		{"streamtwice", []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeTransient, sdk.OutcomeTransient}, "answered message 0 (id 1) twice"},
		{"streamshort", []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeTransient, sdk.OutcomeTransient}, "the plugin answered 1 of them"},
		{"streamempty", []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeTransient, sdk.OutcomeTransient}, "answered no verdict in an answer"},
		{"streamhold", []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeSuccess, sdk.OutcomeSuccess}, ""},
		// A plugin without SendStream (built before it, or not on the SDK):
		// Send, as before.
		{"unary", []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeSuccess, sdk.OutcomeSuccess}, ""},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			testenv.InstallPlugin(t, b.dir, tt.mode, rawPkg)
			ctx := testenv.Context(t)
			p, err := b.host.Plugin(ctx, tt.mode)
			if err != nil {
				t.Fatalf("Plugin(%s): %v", tt.mode, err)
			}
			if err := p.Configure(ctx, "ch", json.RawMessage(`{}`)); err != nil {
				t.Fatalf("Configure: %v", err)
			}
			for range 2 { // the second on what the first learnt (unary: Send at once)
				ms := msgs(`{}`, `{}`, `{}`)
				for i := range ms {
					ms[i].Deadline = time.Now().Add(time.Minute)
				}
				start := time.Now()
				vs, times := sendEach(ctx, p, ms)
				if took := time.Since(start); took > 30*time.Second {
					t.Errorf("SendEach took %s: it waited for the call's deadline", took.Round(time.Second))
				}
				for i, n := range times {
					if n != 1 {
						t.Errorf("message %d given %d verdicts, want one", i, n)
					}
				}
				for i, v := range vs {
					if v.Outcome != tt.want[i] {
						t.Errorf("message %d: %v %.200q, want %v", i, v.Outcome, v.Detail, tt.want[i])
					}
					if v.Outcome == sdk.OutcomeTransient && (!strings.Contains(v.Detail, pluginhost.DetailCallFailed) || !strings.Contains(v.Detail, tt.why)) {
						t.Errorf("message %d: detail %.300q, want %q saying %q", i, v.Detail, pluginhost.DetailCallFailed, tt.why)
					}
				}
			}
		})
	}
}
