package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// TestTokenSource_redact_manyRotations: after many refreshes (and refresh
// token rotations), every token this process ever used, the config's tokens
// and the client secret are still redacted when Kakao echoes them back.
// Before, the list kept the last 16 values, so the config's refresh token
// and the client secret were forgotten after a handful of refreshes.
func TestTokenSource_redact_manyRotations(t *testing.T) {
	t.Parallel()
	const refreshes = 24
	b := setup(t, map[string]any{"client_secret": testSecret})
	b.fake.set(func(f *fakeKakao) { f.clientSecret = testSecret })

	current := testAccess
	for i := 1; i <= refreshes; i++ {
		b.clock.Advance(12 * time.Hour) // past the refresh cooldown, as Kakao's token lifetime
		b.fake.expireAccess(current)
		if i%3 == 0 {
			b.fake.set(func(f *fakeKakao) { f.rotate = true })
		}
		wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
		current = fmt.Sprintf("ACCESS-issued-%d", i)
	}
	if n := len(b.fake.tokenRequests()); n != refreshes {
		t.Fatalf("refreshes = %d, want %d", n, refreshes)
	}

	used := []string{testAccess, testRefresh, testSecret, b.fake.clientID}
	for i := 1; i <= refreshes; i++ {
		used = append(used, fmt.Sprintf("ACCESS-issued-%d", i))
		if i%3 == 0 {
			used = append(used, fmt.Sprintf("REFRESH-issued-%d", i))
		}
	}
	for _, secret := range used {
		msg, _ := json.Marshal("rejected " + secret + " for this request")
		b.fake.answer(400, `{"msg":`+string(msg)+`,"code":-2}`)
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 400, "-2")
		if strings.Contains(v.Detail, secret) || !strings.Contains(v.Detail, sdk.Redacted) {
			t.Errorf("Kakao echoing %q: detail = %q; want it redacted", secret, v.Detail)
		}
	}
	// setup's cleanup checks every verdict and log line for every token too.
}

// TestParseConfig_urlCredentials: a bad api_url or auth_url is named in the
// error without its user info or query values.
func TestParseConfig_urlCredentials(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"https://cfg-user:cfg-pass-123@kapi.example/?token=cfg-token-456",
		"ftp://cfg-user:cfg-pass-123@kapi.example/?token=cfg-token-456",
		"https://cfg-user:cfg-pass-123@/x",
	} {
		for _, key := range []string{"api_url", "auth_url"} {
			cfg, _ := json.Marshal(map[string]any{"mode": "memo", "access_token": testAccess, key: bad})
			_, err := parseConfig(sdk.ConfigureRequest{Config: cfg})
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Fatalf("%s %q: error = %v; want one naming %s", key, bad, err, key)
			}
			for _, secret := range []string{"cfg-pass-123", "cfg-token-456"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("%s error %q shows %q", key, err, secret)
				}
			}
		}
	}
}
