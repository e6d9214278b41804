package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

func features(path string) sdktest.Features {
	cfg, _ := json.Marshal(map[string]string{"path": path})
	return sdktest.Features{
		Config: cfg,
		Invalid: map[string]json.RawMessage{
			"missing path":    json.RawMessage(`{}`),
			"unwritable path": json.RawMessage(`{"path":"/nonexistent/dir/out.jsonl"}`),
		},
		Succeed:   sdk.Message{Recipient: "alice", Payload: json.RawMessage(`{"text":"hello"}`)},
		Permanent: &sdk.Message{Recipient: "", Payload: json.RawMessage(`{"text":"to nobody"}`)},
	}
}

// TestConformance runs the provider in-process, then checks that every
// message the suite saw delivered is in the file, once.
func TestConformance(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	rep := sdktest.Run(t, provider{}, features(path))

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := map[int64]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct{ ID int64 }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines[l.ID]++
	}
	for _, m := range rep.Sent {
		if lines[m.ID] != 1 {
			t.Errorf("message %d: in the file %d times, want once", m.ID, lines[m.ID])
		}
	}
}

// TestConformance_Binary runs the same suite against the built plugin, as
// notifyd would launch it.
func TestConformance_Binary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "notifyd-plugin-hello")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sdktest.RunBinary(t, bin, features(filepath.Join(t.TempDir(), "out.jsonl")))
}
