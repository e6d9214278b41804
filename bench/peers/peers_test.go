package peers_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/notifyd/notifyd/bench/peers"
	"github.com/notifyd/notifyd/internal/testenv"
)

// TestMain lets the coordinator re-execute the test binary as the sink and
// the peers' workers, as it re-executes the peers binary.
func TestMain(m *testing.M) {
	peers.MaybeChild()
	os.Exit(m.Run())
}

// TestEverySystemDeliversAll runs every system once on a small burst against
// the real services and the daemon built from this checkout: each must
// deliver every notification to the sink. No figure is asserted.
func TestEverySystemDeliversAll(t *testing.T) {
	const n = 500
	bin := t.TempDir()
	plugins := filepath.Join(bin, "plugins")
	build(t, filepath.Join(bin, "notifyd"), "./cmd/notifyd")
	build(t, filepath.Join(plugins, "notifyd-plugin-webhook"), "./plugins/webhook")

	redisURL, err := url.Parse(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := peers.Run(ctx, peers.Options{
		N: n, Rounds: 1,
		PostgresURL: testenv.DatabaseURL(), RedisAddr: redisURL.Host,
		RedisDB:    12, // not the command's default, so a benchmark may run beside the test
		NotifydBin: filepath.Join(bin, "notifyd"), PluginsDir: plugins,
		Out: &out,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 1 || len(rep.Rounds[0].Results) != len(peers.Systems) {
		t.Fatalf("got %d rounds, want 1 with a result for each of %v", len(rep.Rounds), peers.Systems)
	}
	for i, res := range rep.Rounds[0].Results {
		if res.System != peers.Systems[i] {
			t.Errorf("result %d is %s, want %s (the order asked for)", i, res.System, peers.Systems[i])
		}
		if res.Delivered != n {
			t.Errorf("%s: the sink saw %d distinct notifications, want %d", res.System, res.Delivered, n)
		}
		if res.Throughput <= 0 || res.CPU.WallSeconds <= 0 {
			t.Errorf("%s: throughput %.0f/s over %.3f s: nothing measured", res.System, res.Throughput, res.CPU.WallSeconds)
		}
	}
	if r := rep.Rounds[0].Ratios; r.BestPeer == "" || r.ThroughputVsRaw <= 0 {
		t.Errorf("ratios not computed: %+v", r)
	}
}

// build compiles the main module's package pkg to out, from the repository's
// root, so the daemon links exactly what `make build` links.
func build(t *testing.T, out, pkg string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
}
