// Package testdaemon starts a whole notifyd daemon for a test, through the
// root package as an embedder would, and stops it when the test ends. (Not
// in testenv: the root imports the packages whose own tests use testenv.)
package testdaemon

import (
	"context"
	"testing"
	"time"

	"github.com/notifyd/notifyd"
)

// Start is notifyd.Start, failing the test if the daemon does not start,
// and stopping it (within 10 s, an error failing the test) when the test
// ends.
func Start(t testing.TB, ctx context.Context, cfg *notifyd.Config, o notifyd.Options) *notifyd.Daemon {
	t.Helper()
	d, err := notifyd.Start(ctx, cfg, o)
	if err != nil {
		t.Fatalf("notifyd.Start: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Stop(sctx); err != nil {
			t.Errorf("stop the daemon: %v", err)
		}
	})
	return d
}
