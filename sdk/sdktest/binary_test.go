package sdktest_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

func TestRunBinary(t *testing.T) {
	t.Parallel()
	rep := sdktest.RunBinary(t, buildGood(t), sdktest.Features{
		Config:    json.RawMessage(`{"target":"x"}`),
		Invalid:   map[string]json.RawMessage{"missing target": json.RawMessage(`{}`)},
		Succeed:   sdk.Message{Recipient: "user-1", Payload: json.RawMessage(`{"text":"hi"}`)},
		Permanent: &sdk.Message{Recipient: "nobody", Payload: json.RawMessage(`{}`)},
	})
	// 1 + the 16 successes of the mixed batch of 32 (Succeed and Permanent
	// alternating) + one batch of 32 + four concurrent batches of 32.
	const want = 1 + 16 + 32 + 4*32
	if rep.Info.Name != "good" || len(rep.Sent) != want {
		t.Errorf("report: got %s with %d sent, want good with %d", rep.Info.Name, len(rep.Sent), want)
	}
}

// buildGood builds testdata/good, a plugin written against this module
// alone, with the go tool running the test.
func buildGood(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "notifyd-plugin-good")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/good").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./testdata/good: %v\n%s", err, out)
	}
	return bin
}
