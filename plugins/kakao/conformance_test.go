package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// conformanceFeatures points a friends channel at a fresh fake.
func conformanceFeatures(t *testing.T) (*fakeKakao, sdktest.Features) {
	f := newFakeKakao(t)
	f.validAccess(testAccess)
	f.validRefresh(testRefresh)
	cfg, err := json.Marshal(map[string]any{
		"mode": "friends", "access_token": testAccess, "refresh_token": testRefresh, "client_id": f.clientID,
		"api_url": f.api.URL, "auth_url": f.auth.URL, "timeout": "5s",
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, sdktest.Features{
		Config: cfg,
		Invalid: map[string]json.RawMessage{
			"missing mode":              json.RawMessage(`{"access_token":"a"}`),
			"bad mode":                  json.RawMessage(`{"mode":"group","access_token":"a"}`),
			"no token":                  json.RawMessage(`{"mode":"memo"}`),
			"refresh without client_id": json.RawMessage(`{"mode":"memo","refresh_token":"r"}`),
			"relative api_url":          json.RawMessage(`{"mode":"memo","access_token":"a","api_url":"kapi.kakao.com"}`),
			"bad timeout":               json.RawMessage(`{"mode":"memo","access_token":"a","timeout":"soon"}`),
			"template without type":     json.RawMessage(`{"mode":"memo","access_token":"a","template":{"text":"{{.x}}"}}`),
		},
		Succeed:   sdk.Message{Recipient: testUUID, Payload: json.RawMessage(textPayload)},
		Permanent: &sdk.Message{Recipient: testUUID, Payload: json.RawMessage(`{"text":"no object_type"}`)},
	}
}

// checkSent: every message the suite saw delivered reached the fake as a
// friends send to its recipient.
func checkSent(t *testing.T, f *fakeKakao, rep *sdktest.Report) {
	t.Helper()
	delivered := map[string]int{}
	for _, r := range f.sendRequests() {
		if r.Path == pathFriends {
			delivered[r.Form.Get("receiver_uuids")]++
		}
	}
	for _, m := range rep.Sent {
		want := `["` + m.Recipient + `"]`
		if delivered[want] == 0 {
			t.Errorf("message %d reported SENT but the fake never got receiver_uuids %s", m.ID, want)
		}
	}
	if len(rep.Sent) == 0 {
		t.Error("the suite delivered nothing")
	}
}

func TestConformance(t *testing.T) {
	f, features := conformanceFeatures(t)
	rep := sdktest.Run(t, &provider{}, features)
	checkSent(t, f, rep)
}

// TestConformance_Binary runs the suite against the built plugin, launched
// as notifyd launches it, so main and sdk.Serve are covered too.
func TestConformance_Binary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "notifyd-plugin-kakao")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, features := conformanceFeatures(t)
	rep := sdktest.RunBinary(t, bin, features)
	checkSent(t, f, rep)
}
