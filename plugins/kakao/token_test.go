package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// checkRefreshRequest asserts the exact refresh request Kakao documents.
func checkRefreshRequest(t *testing.T, r recordedRequest, clientID, refresh, secret string) {
	t.Helper()
	if r.Method != "POST" || r.Path != "/oauth/token" {
		t.Errorf("refresh request = %s %s, want POST /oauth/token", r.Method, r.Path)
	}
	if got, want := r.Header.Get("Content-Type"), "application/x-www-form-urlencoded;charset=utf-8"; got != want {
		t.Errorf("refresh Content-Type = %q, want %q", got, want)
	}
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("refresh sent Authorization %q, want none", got)
	}
	want := map[string][]string{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {refresh}}
	if secret != "" {
		want["client_secret"] = []string{secret}
	}
	if got := map[string][]string(r.Form); !reflect.DeepEqual(got, want) {
		t.Errorf("refresh form = %v, want %v", redactForm(got), redactForm(want))
	}
}

// redactForm keeps a failing test's message free of tokens too.
func redactForm(f map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range f {
		if k == "refresh_token" || k == "client_secret" {
			v = []string{fmt.Sprintf("<%d values, %d bytes>", len(v), len(strings.Join(v, "")))}
		}
		out[k] = v
	}
	return out
}

func TestSender_Send_ExpiredToken(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"client_secret": testSecret})
	b.fake.set(func(f *fakeKakao) { f.clientSecret = testSecret })
	b.fake.expireAccess(testAccess)

	v := b.send(b.sender, "", textPayload)
	wantVerdict(t, v, sdk.OutcomeSuccess, 200, "")

	sends, tokens := b.fake.sendRequests(), b.fake.tokenRequests()
	if len(sends) != 2 || len(tokens) != 1 {
		t.Fatalf("sends = %d, refreshes = %d, want 2 and 1", len(sends), len(tokens))
	}
	checkSendRequest(t, sends[0], pathMemo, testAccess)
	checkRefreshRequest(t, tokens[0], b.fake.clientID, testRefresh, testSecret)
	checkSendRequest(t, sends[1], pathMemo, "ACCESS-issued-1")
	if sends[0].Form.Get("template_object") != sends[1].Form.Get("template_object") {
		t.Errorf("retry sent a different template_object")
	}
	if !strings.Contains(b.logs.String(), "access token refreshed") {
		t.Errorf("log does not mention the refresh:\n%s", b.logs.String())
	}

	// The next send uses the new token straight away.
	v = b.send(b.sender, "", textPayload)
	wantVerdict(t, v, sdk.OutcomeSuccess, 200, "")
	if sends := b.fake.sendRequests(); len(sends) != 3 {
		t.Fatalf("sends = %d, want 3", len(sends))
	} else {
		checkSendRequest(t, sends[2], pathMemo, "ACCESS-issued-1")
	}
	if n := len(b.fake.tokenRequests()); n != 1 {
		t.Errorf("refreshes = %d, want 1", n)
	}
}

func TestSender_Send_RotatedRefreshToken(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.expireAccess(testAccess)
	b.fake.set(func(f *fakeKakao) { f.rotate = true })

	wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
	b.clock.Advance(12 * time.Hour) // Kakao access tokens live about 12 hours
	b.fake.expireAccess("ACCESS-issued-1")
	wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")

	tokens := b.fake.tokenRequests()
	if len(tokens) != 2 {
		t.Fatalf("refreshes = %d, want 2", len(tokens))
	}
	checkRefreshRequest(t, tokens[0], b.fake.clientID, testRefresh, "")
	// Kakao expired the old refresh token when it issued the new one.
	checkRefreshRequest(t, tokens[1], b.fake.clientID, "REFRESH-issued-1", "")
	if !strings.Contains(b.logs.String(), "refresh_token_rotated=true") {
		t.Errorf("log does not record the rotation:\n%s", b.logs.String())
	}
}

func TestSender_Send_RefreshFails(t *testing.T) {
	t.Parallel()
	t.Run("invalid refresh token", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.expireAccess(testAccess)
		b.fake.set(func(f *fakeKakao) { f.refresh = map[string]bool{} }) // expired: KOE322
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 400, "KOE322")
		if !strings.Contains(v.Detail, "invalid_grant") || !strings.Contains(v.Detail, "expired_or_invalid_refresh_token") {
			t.Errorf("detail = %q, want Kakao's reason", v.Detail)
		}
		if n := len(b.fake.sendRequests()); n != 1 {
			t.Errorf("sends = %d, want 1 (no retry without a new token)", n)
		}
		// Kakao will not accept that refresh token later either: the next
		// send fails the same way without asking again.
		v = b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 400, "KOE322")
		if n := len(b.fake.tokenRequests()); n != 1 {
			t.Errorf("refreshes = %d, want 1", n)
		}
	})
	t.Run("bad client secret", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]any{"client_secret": testSecret})
		b.fake.set(func(f *fakeKakao) { f.clientSecret = "another-secret" })
		b.fake.expireAccess(testAccess)
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 401, "KOE010")
	})
	t.Run("auth server down", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.expireAccess(testAccess)
		b.fake.set(func(f *fakeKakao) { f.refreshC = []cannedAnswer{{status: 503, body: `<html>unavailable</html>`}} })
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomeTransient, 503, "-401")
		// A later send tries again and succeeds.
		wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
		if n := len(b.fake.tokenRequests()); n != 2 {
			t.Errorf("refreshes = %d, want 2", n)
		}
	})
	t.Run("an unexpected 4xx from the token endpoint is not the end of the channel", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.expireAccess(testAccess)
		b.fake.set(func(f *fakeKakao) {
			f.refreshC = []cannedAnswer{{status: 400, body: `{"error":"invalid_request","error_description":"temporarily refused","error_code":"KOE999"}`}}
		})
		v := b.send(b.sender, "", textPayload)
		if v.Outcome == sdk.OutcomeSuccess {
			t.Fatalf("send with a refused refresh = %v, want a failure", v)
		}
		// Only invalid_grant and invalid_client latch the channel: the next
		// send refreshes again, and succeeds.
		b.clock.Advance(refreshCooldown)
		wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
		if n := len(b.fake.tokenRequests()); n != 2 {
			t.Errorf("refreshes = %d, want 2 (the failure was not latched)", n)
		}
	})
	t.Run("200 without access_token", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.expireAccess(testAccess)
		b.fake.set(func(f *fakeKakao) { f.refreshC = []cannedAnswer{{status: 200, body: `{"token_type":"bearer"}`}} })
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomeTransient, 200, "-401")
	})
	t.Run("no refresh token configured", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]any{"refresh_token": nil, "client_id": nil})
		b.fake.expireAccess(testAccess)
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 401, "-401")
		if !strings.Contains(v.Detail, "no refresh_token") {
			t.Errorf("detail = %q, want it to say no refresh_token is configured", v.Detail)
		}
	})
	t.Run("refreshed token rejected too", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.answer(401, `{"msg":"this access token does not exist","code":-401}`)
		b.fake.answer(401, `{"msg":"app key mismatch","code":-401}`)
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 401, "-401")
		if !strings.Contains(v.Detail, "refreshed access token too") {
			t.Errorf("detail = %q", v.Detail)
		}
		if s, r := len(b.fake.sendRequests()), len(b.fake.tokenRequests()); s != 2 || r != 1 {
			t.Errorf("sends = %d, refreshes = %d, want 2 and 1 (retry once)", s, r)
		}

		// A token rejected right after its refresh is not expired: the next
		// send does not spend Kakao's token quota on another refresh…
		b.fake.answer(401, `{"msg":"app key mismatch","code":-401}`)
		v = b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 401, "-401")
		if !strings.Contains(v.Detail, "not refreshing again") {
			t.Errorf("detail = %q, want it to explain the refresh cooldown", v.Detail)
		}
		if r := len(b.fake.tokenRequests()); r != 1 {
			t.Errorf("refreshes = %d, want still 1", r)
		}
		// …but once the cooldown has passed, a rejection refreshes again.
		b.clock.Advance(refreshCooldown)
		b.fake.answer(401, `{"msg":"this access token does not exist","code":-401}`)
		wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
		if r := len(b.fake.tokenRequests()); r != 2 {
			t.Errorf("refreshes = %d, want 2", r)
		}
	})
}

// TestSender_Send_RefreshExpiresInShape: a token answer whose expires_in is
// not a JSON integer ("21599", 21599.0, "soon") still carries the new
// tokens. It was thrown away whole (json.Unmarshal failed), and with it the
// rotated refresh token — Kakao expired the old one when it issued it — so
// the next refresh was invalid_grant and the channel dead for good: an
// oddity of an optional field made final.
func TestSender_Send_RefreshExpiresInShape(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		expires string
		life    time.Duration
	}{
		{`"21599"`, 21599 * time.Second},
		{`21599.0`, 21599 * time.Second},
		{`"soon"`, accessLifetime}, // not a number: Kakao's documented lifetime
		{`-5`, accessLifetime},
	} {
		t.Run(tt.expires, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.expireAccess(testAccess)
			const access, refresh = "ACCESS-issued-shape", "REFRESH-issued-shape"
			b.fake.validAccess(access)
			b.fake.set(func(f *fakeKakao) {
				delete(f.refresh, testRefresh) // rotated: the old one stops working at once
				f.refresh[refresh] = true
				f.refreshC = []cannedAnswer{{status: 200, body: `{"access_token":"` + access + `","token_type":"bearer","refresh_token":"` + refresh +
					`","expires_in":` + tt.expires + `,"refresh_token_expires_in":"5183999"}`}}
			})
			wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
			ts := b.sender.(*sender).tokens
			ts.mu.Lock()
			got, life := ts.refresh, ts.expires.Sub(ts.refreshed)
			ts.mu.Unlock()
			if got != refresh {
				t.Errorf("the rotated refresh token was not kept (the channel's next refresh is invalid_grant)")
			}
			if life != tt.life {
				t.Errorf("access token lifetime = %v, want %v", life, tt.life)
			}
		})
	}
}

// TestSender_Send_RefreshServerErrorNotFinal: a token endpoint answering a
// 5xx or a 429 whose body happens to say invalid_grant is not Kakao's final
// refusal. It latched the channel dead while the message was TRANSIENT:
// from then on no send refreshed again (not even once the endpoint was
// back), every -401 was retried until its budget ran out, and the keeper
// stopped.
func TestSender_Send_RefreshServerErrorNotFinal(t *testing.T) {
	t.Parallel()
	for _, status := range []int{503, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.expireAccess(testAccess)
			b.fake.set(func(f *fakeKakao) {
				f.refreshC = []cannedAnswer{{status: status, body: `{"error":"invalid_grant","error_description":"upstream unavailable","error_code":"KOE322"}`}}
			})
			v := b.send(b.sender, "", textPayload)
			wantVerdict(t, v, sdk.OutcomeTransient, status, "KOE322")
			if strings.Contains(v.Detail, "log the user in again") {
				t.Errorf("detail = %q: a retried failure asks the operator for nothing", v.Detail)
			}
			// The token endpoint is back: the next send refreshes and goes out.
			wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
			if n := len(b.fake.tokenRequests()); n != 2 {
				t.Errorf("refreshes = %d, want 2 (the %d was not Kakao's final refusal)", n, status)
			}
		})
	}
}

// TestSender_Send_RefreshGarbageAccessToken: a token answer whose
// access_token cannot be a token (a header injection, an oversized value)
// is a failed refresh, retried. It was adopted: every later send then
// failed in the client ("invalid header field value") before reaching
// Kakao, so no -401 ever came to trigger a new refresh and the channel
// stalled until the keeper's refresh at expires_in.
func TestSender_Send_RefreshGarbageAccessToken(t *testing.T) {
	t.Parallel()
	for name, token := range map[string]string{
		"header injection": `garbage\r\nX-Injected: 1`,
		"over 4 KiB":       strings.Repeat("A", maxAccessToken+1),
		"not ASCII":        "토큰",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.expireAccess(testAccess)
			b.fake.set(func(f *fakeKakao) {
				f.refreshC = []cannedAnswer{{status: 200, body: `{"access_token":"` + token + `","token_type":"bearer","expires_in":21599}`}}
			})
			v := b.send(b.sender, "", textPayload)
			wantVerdict(t, v, sdk.OutcomeTransient, 200, "-401")
			if strings.Contains(v.Detail, "garbage") || len(v.Detail) > 300 {
				t.Errorf("detail = %.300q, want it without the value", v.Detail)
			}
			b.clock.Advance(refreshCooldown)
			wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
			if n := len(b.fake.tokenRequests()); n != 2 {
				t.Errorf("refreshes = %d, want 2 (the garbage token is no token)", n)
			}
		})
	}

	// The same answer with a rotated refresh token: Kakao expired the old one
	// when it issued the new, which was thrown away with the access token,
	// so the next refresh was invalid_grant and the channel dead for good.
	t.Run("with a rotated refresh token", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.expireAccess(testAccess)
		const refresh = "REFRESH-rotated-beside-garbage"
		b.fake.set(func(f *fakeKakao) {
			delete(f.refresh, testRefresh)
			f.refresh[refresh] = true
			f.refreshC = []cannedAnswer{{status: 200, body: `{"access_token":"garbage\r\nX: 1","refresh_token":"` + refresh + `","expires_in":21599}`}}
		})
		wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeTransient, 200, "-401")
		b.clock.Advance(refreshCooldown)
		wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
		if reqs := b.fake.tokenRequests(); len(reqs) != 2 || reqs[1].Form.Get("refresh_token") != refresh {
			t.Errorf("%d refreshes, want 2, the second with the rotated refresh token", len(reqs))
		}
	})
}

// TestSender_Send_ConcurrentRefresh: many sends hit -401 together; exactly
// one refresh runs and every send retries with its token.
func TestSender_Send_ConcurrentRefresh(t *testing.T) {
	t.Parallel()
	const n = 24
	b := setup(t, nil)
	b.fake.expireAccess(testAccess)
	gate := make(chan struct{})
	var once sync.Once
	// Hold the refresh until every send has been rejected, so all of them
	// are waiting on it.
	b.fake.set(func(f *fakeKakao) {
		f.refreshGate = gate
		f.onReject = func(k int) {
			if k == n {
				once.Do(func() { close(gate) })
			}
		}
	})
	t.Cleanup(func() { once.Do(func() { close(gate) }) })

	var wg sync.WaitGroup
	verdicts := make([]sdk.Verdict, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			verdicts[i] = b.send(b.sender, "", textPayload)
		}()
	}
	wg.Wait()
	for i, v := range verdicts {
		if v.Outcome != sdk.OutcomeSuccess {
			t.Errorf("send %d: %s %s", i, v.Outcome, v.Detail)
		}
	}
	if r := len(b.fake.tokenRequests()); r != 1 {
		t.Errorf("refreshes = %d, want exactly 1", r)
	}
	sends := b.fake.sendRequests()
	if len(sends) != 2*n {
		t.Fatalf("sends = %d, want %d", len(sends), 2*n)
	}
	var withNew int
	for _, s := range sends {
		if s.Header.Get("Authorization") == "Bearer ACCESS-issued-1" {
			withNew++
		}
	}
	if withNew != n {
		t.Errorf("sends with the refreshed token = %d, want %d", withNew, n)
	}
}

// TestSender_Send_WaiterDeadline: a send whose deadline passes while waiting
// for a refresh gives up (transient) without cancelling the refresh.
func TestSender_Send_WaiterDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.expireAccess(testAccess)
	gate := make(chan struct{})
	b.fake.set(func(f *fakeKakao) { f.refreshGate = gate })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	v := b.sender.Send(ctx, sdk.Message{ID: 1, Payload: json.RawMessage(textPayload), Attempt: 1})
	wantVerdict(t, v, sdk.OutcomeTransient, 401, "-401")
	close(gate)
	// The refresh finished for the next send, which needs no other.
	wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
	if n := len(b.fake.tokenRequests()); n != 1 {
		t.Errorf("refreshes = %d, want 1", n)
	}
}

func TestSender_Send_RefreshTokenOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"access_token": nil})
	wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
	sends, tokens := b.fake.sendRequests(), b.fake.tokenRequests()
	if len(sends) != 1 || len(tokens) != 1 {
		t.Fatalf("sends = %d, refreshes = %d, want 1 and 1", len(sends), len(tokens))
	}
	checkSendRequest(t, sends[0], pathMemo, "ACCESS-issued-1")
}

func TestTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "kakao-tokens.json")
	b := setup(t, map[string]any{"token_file": path})
	b.fake.expireAccess(testAccess)
	b.fake.set(func(f *fakeKakao) { f.rotate = true })
	wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")

	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("token file not written: %v", err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Errorf("token file mode = %o, want 600", perm)
	}
	var saved tokenFileData
	raw, _ := os.ReadFile(path)
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatalf("token file: %v", err)
	}
	if saved.AccessToken != "ACCESS-issued-1" || saved.RefreshToken != "REFRESH-issued-1" {
		t.Errorf("saved tokens = %d/%d bytes, want the refreshed pair", len(saved.AccessToken), len(saved.RefreshToken))
	}

	t.Run("restart uses the saved tokens", func(t *testing.T) {
		// The config's refresh token is dead (Kakao rotated it), yet a new
		// sender configured from the same config refreshes fine.
		b.fake.expireAccess("ACCESS-issued-1")
		s := b.configure(map[string]any{"mode": "memo", "access_token": testAccess, "refresh_token": testRefresh,
			"client_id": b.fake.clientID, "api_url": b.fake.api.URL, "auth_url": b.fake.auth.URL, "token_file": path})
		wantVerdict(t, b.send(s, "", textPayload), sdk.OutcomeSuccess, 200, "")
		tokens := b.fake.tokenRequests()
		checkRefreshRequest(t, tokens[len(tokens)-1], b.fake.clientID, "REFRESH-issued-1", "")
	})
	t.Run("new refresh_token in config wins", func(t *testing.T) {
		b.fake.validRefresh("REFRESH-operator-new")
		b.fake.validAccess("ACCESS-operator-new")
		s := b.configure(map[string]any{"mode": "memo", "access_token": "ACCESS-operator-new", "refresh_token": "REFRESH-operator-new",
			"client_id": b.fake.clientID, "api_url": b.fake.api.URL, "auth_url": b.fake.auth.URL, "token_file": path})
		wantVerdict(t, b.send(s, "", textPayload), sdk.OutcomeSuccess, 200, "")
		sends := b.fake.sendRequests()
		checkSendRequest(t, sends[len(sends)-1], pathMemo, "ACCESS-operator-new")
	})
}

// TestTokenKeeper: an idle channel refreshes its access token ahead of each
// expiry (so the refresh token, rotated in its last month, never lapses);
// Close stops that.
func TestTokenKeeper(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"mode": "memo"})
	b.provider.keepTick = 5 * time.Millisecond
	s := b.configure(map[string]any{
		"mode": "memo", "access_token": testAccess, "refresh_token": testRefresh, "client_id": b.fake.clientID,
		"api_url": b.fake.api.URL, "auth_url": b.fake.auth.URL, "timeout": "5s",
	})
	waitRefreshes := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(b.fake.tokenRequests()) < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := len(b.fake.tokenRequests()); got != want {
			t.Fatalf("%d token requests, want %d", got, want)
		}
	}
	// applied waits until the keeper has stored the token of refresh n: the
	// fake counts the request as it arrives, and advancing the clock before
	// the keeper stored the answer would date the new token's expiry from
	// the later time (a rehearsal beside CPU burners did: 1 refresh, want 2).
	ts := s.(*sender).tokens
	applied := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ts.mu.Lock()
			gen := ts.gen
			ts.mu.Unlock()
			if gen >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the keeper stored %d refreshed tokens, want %d", gen, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	ts.mu.Lock()
	gen0 := ts.gen
	ts.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	waitRefreshes(0) // the config's token is young: nothing yet
	b.clock.Advance(accessLifetime - refreshAhead + time.Second)
	waitRefreshes(1)
	applied(gen0 + 1)
	time.Sleep(50 * time.Millisecond)
	waitRefreshes(1) // the new token is good for hours (the fake's expires_in: 12 h)
	b.clock.Advance(6 * time.Hour)
	time.Sleep(50 * time.Millisecond)
	waitRefreshes(1)
	b.clock.Advance(6 * time.Hour)
	waitRefreshes(2)
	applied(gen0 + 2)
	if v := b.send(s, "", textPayload); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("send with the kept token: %v %q", v.Outcome, v.Detail)
	}
	if err := s.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(accessLifetime)
	time.Sleep(50 * time.Millisecond)
	waitRefreshes(2) // closed: no more
}

// TestSender_Send_RefreshTokenFieldTypes: a token answer that rotates the
// refresh token but has another field of another JSON type than a string
// where the plugin reads one (access_token a number, an object, a list;
// token_type a number). json.Unmarshal failed for the whole answer and the
// rotated refresh token went with it: Kakao had expired the old one when it
// issued the new, so the next refresh was invalid_grant and the channel
// dead for good. The tokens are read each on its own: the rotated refresh
// token is kept, a usable access token is used.
func TestSender_Send_RefreshTokenFieldTypes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		answer string
		sent   bool // the answer's access token is usable: the send goes out at once
	}{
		"access_token a number":  {`{"access_token":12345,"refresh_token":"%s","expires_in":21599}`, false},
		"access_token an object": {`{"access_token":{"value":"x"},"refresh_token":"%s","expires_in":21599}`, false},
		"access_token a list":    {`{"access_token":["ACCESS-in-a-list"],"refresh_token":"%s","expires_in":21599}`, false},
		"token_type a number":    {`{"access_token":"ACCESS-typed","token_type":1,"refresh_token":"%s","expires_in":21599}`, true},
		"scope an object":        {`{"access_token":"ACCESS-typed","scope":{"talk_message":true},"refresh_token":"%s","expires_in":21599}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.expireAccess(testAccess)
			const refresh = "REFRESH-rotated-beside-a-typed-field"
			b.fake.validAccess("ACCESS-typed")
			b.fake.set(func(f *fakeKakao) {
				delete(f.refresh, testRefresh) // rotated: the old one stops working at once
				f.refresh[refresh] = true
				f.refreshC = []cannedAnswer{{status: 200, body: fmt.Sprintf(tc.answer, refresh)}}
			})
			v := b.send(b.sender, "", textPayload)
			if tc.sent {
				wantVerdict(t, v, sdk.OutcomeSuccess, 200, "")
			} else {
				wantVerdict(t, v, sdk.OutcomeTransient, 200, "-401")
				b.clock.Advance(refreshCooldown)
				wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeSuccess, 200, "")
			}
			ts := b.sender.(*sender).tokens
			ts.mu.Lock()
			got := ts.refresh
			ts.mu.Unlock()
			if got != refresh {
				t.Errorf("the rotated refresh token was not kept (the channel's next refresh is invalid_grant)")
			}
		})
	}
}
