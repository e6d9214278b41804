package sdktest_test

import (
	"encoding/json"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

func TestRunBinary(t *testing.T) {
	t.Parallel()
	rep := sdktest.RunBinary(t, testenv.BuildPlugin(t, "./testdata/good"), sdktest.Features{
		Config:    json.RawMessage(`{"target":"x"}`),
		Invalid:   map[string]json.RawMessage{"missing target": json.RawMessage(`{}`)},
		Succeed:   sdk.Message{Recipient: "user-1", Payload: json.RawMessage(`{"text":"hi"}`)},
		Permanent: &sdk.Message{Recipient: "nobody", Payload: json.RawMessage(`{}`)},
	})
	if rep.Info.Name != "good" || len(rep.Sent) != 1+32+4*32 {
		t.Errorf("report: got %s with %d sent, want good with %d", rep.Info.Name, len(rep.Sent), 1+32+4*32)
	}
}
