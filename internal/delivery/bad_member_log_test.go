package delivery_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/testenv"
)

// A member that is no notification id, written straight into a running
// instance's backup list (another program, a partial restore), is dropped by
// the next orphan check's Pending. It must be said in the log: the orphan
// check discarded Pending's error, so the drop left no trace.
func TestEngine_BadMemberInBackupListLogged(t *testing.T) {
	t.Parallel()
	s := newSink(t, func(string, int, http.Header) (int, string) { return 200, "" })
	b := setup(t, s)
	ctx := context.Background()
	var logs testenv.SyncBuffer
	log := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: &logs})
	b.start(delivery.Options{Instance: "a", Logger: log})
	// One delivery first: the engine has resumed its backup list and is
	// fetching, so only the orphan check can meet what is written next.
	b.wait(b.send("r", "first"), 15*time.Second)
	const bad = "zz-not-an-id"
	processing := b.prefix + ":{ch:" + testChannel + "}:processing:a"
	if err := b.rc.LPush(ctx, processing, bad).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), bad) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), bad) {
		gone := true
		for _, v := range b.rc.LRange(ctx, processing, 0, -1).Val() {
			gone = gone && v != bad
		}
		t.Errorf("a bad member in the backup list was never logged (dropped from the list: %v):\n%s", gone, logs.String())
	}
}
