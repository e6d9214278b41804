package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// features points the plugin at a FakeBatchAPI, which answers in shuffled
// order: the suite's "Send/batch answered out of order" fails a sender
// that matches answers by position.
func features(api *sdktest.FakeBatchAPI) sdktest.Features {
	cfg, _ := json.Marshal(map[string]string{"url": api.URL})
	return sdktest.Features{
		Config: cfg,
		Invalid: map[string]json.RawMessage{
			"missing url":     json.RawMessage(`{}`),
			"not an http url": json.RawMessage(`{"url":"mailto:ops@example.com"}`),
		},
		Succeed:   sdk.Message{Recipient: "user-1", Payload: json.RawMessage(`{"text":"hello"}`)},
		Permanent: &sdk.Message{Recipient: sdktest.RejectPrefix + "user-2", Payload: json.RawMessage(`{"text":"to nobody"}`)},
		Transient: &sdk.Message{Recipient: sdktest.ThrottlePrefix + "user-3", Payload: json.RawMessage(`{"text":"later"}`)},
		BatchAPI:  api,
		Batch:     250, // over MaxPerRequest: several requests per call
	}
}

// acceptedOnce checks that every message the suite saw delivered was
// accepted by the API once.
func acceptedOnce(t *testing.T, api *sdktest.FakeBatchAPI, rep *sdktest.Report) {
	accepted := api.Accepted()
	for _, m := range rep.Sent {
		if n := accepted[strconv.FormatInt(m.ID, 10)]; n != 1 {
			t.Errorf("message %d: accepted %d times, want once", m.ID, n)
		}
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	api := sdktest.NewFakeBatchAPI(t)
	acceptedOnce(t, api, sdktest.Run(t, provider{}, features(api)))
}

// TestConformance_Binary runs the same suite against the built plugin, as
// notifyd would launch it.
func TestConformance_Binary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "notifyd-plugin-hello-batch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	api := sdktest.NewFakeBatchAPI(t)
	acceptedOnce(t, api, sdktest.RunBinary(t, bin, features(api)))
}
