package main

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

// Test tokens: distinctive strings so a leak is easy to spot.
const (
	testAccess  = "ACCESS-config-7f3a9c"
	testRefresh = "REFRESH-config-51be20"
	testSecret  = "SECRET-client-c0ffee"
	testUUID    = "friend-uuid-0001"
)

// testNow is 2025-03-10 23:30 KST: Kakao's daily quotas reset in 30 minutes.
var testNow = time.Date(2025, 3, 10, 14, 30, 0, 0, time.UTC)

// bundle is one configured Kakao channel against a fresh fake.
type bundle struct {
	t        testing.TB
	fake     *fakeKakao
	provider *provider
	sender   sdk.Sender
	clock    *testClock
	logs     *testenv.SyncBuffer

	mu       sync.Mutex
	verdicts []sdk.Verdict
}

// testClock is the plugin's clock in tests: quota resets are computed from
// it, and it moves only when a test advances it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// setup configures a channel whose api_url and auth_url point at a new fake.
// cfg overrides the defaults (memo mode, valid access token, refresh token,
// client id); a nil value deletes a key. At the end it checks that no token
// appears in any verdict detail or log line.
func setup(t testing.TB, cfg map[string]any) *bundle {
	t.Helper()
	f := newFakeKakao(t)
	f.validAccess(testAccess)
	f.validRefresh(testRefresh)
	full := map[string]any{
		"mode":          "memo",
		"access_token":  testAccess,
		"refresh_token": testRefresh,
		"client_id":     f.clientID,
		"api_url":       f.api.URL,
		"auth_url":      f.auth.URL,
		"timeout":       "5s",
	}
	maps.Copy(full, cfg)
	for k, v := range full {
		if v == nil {
			delete(full, k)
		}
	}
	b := &bundle{t: t, fake: f, clock: &testClock{now: testNow}, logs: &testenv.SyncBuffer{}}
	b.provider = &provider{now: b.clock.Now}
	b.sender = b.configure(full)
	t.Cleanup(b.checkNoSecrets)
	return b
}

// configure builds another sender with the bundle's provider and log.
func (b *bundle) configure(cfg map[string]any) sdk.Sender {
	b.t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "kakao", Output: b.logs, Level: hclog.Trace})
	s, err := b.provider.Configure(context.Background(), sdk.ConfigureRequest{Channel: "test", Config: raw, Logger: logger})
	if err != nil {
		b.t.Fatalf("Configure: %v", err)
	}
	return s
}

// send delivers one message and records the verdict for the secrets check.
func (b *bundle) send(s sdk.Sender, recipient, payload string) sdk.Verdict {
	b.t.Helper()
	v := s.Send(context.Background(), sdk.Message{ID: 1, Channel: "test", Recipient: recipient, Payload: json.RawMessage(payload), Attempt: 1})
	b.mu.Lock()
	b.verdicts = append(b.verdicts, v)
	b.mu.Unlock()
	return v
}

// checkNoSecrets fails if any token the fake knows, issued or configured,
// shows up in a verdict or the log.
func (b *bundle) checkNoSecrets() {
	secrets := []string{testAccess, testRefresh, testSecret, "ACCESS-issued-", "REFRESH-issued-"}
	b.fake.mu.Lock()
	for tok := range b.fake.access {
		secrets = append(secrets, tok)
	}
	for tok := range b.fake.refresh {
		secrets = append(secrets, tok)
	}
	b.fake.mu.Unlock()

	logs := b.logs.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			b.t.Errorf("log output contains secret %q:\n%s", s, logs)
		}
		for _, v := range b.verdicts {
			if strings.Contains(v.Detail, s) || strings.Contains(string(v.Result), s) || strings.Contains(v.ProviderCode, s) {
				b.t.Errorf("verdict %+v contains secret %q", v, s)
			}
		}
	}
}

const textPayload = `{"object_type":"text","text":"Your order shipped","link":{"web_url":"https://shop.example/o/1"}}`

// wantVerdict checks the parts of a verdict a test cares about.
func wantVerdict(t *testing.T, got sdk.Verdict, outcome sdk.Outcome, status int, code string) {
	t.Helper()
	if got.Outcome != outcome || got.ProviderStatus != status || got.ProviderCode != code {
		t.Errorf("verdict = %s status %d code %q (%s), want %s status %d code %q",
			got.Outcome, got.ProviderStatus, got.ProviderCode, got.Detail, outcome, status, code)
	}
}
