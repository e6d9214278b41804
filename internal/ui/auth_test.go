package ui_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/ui"
)

func sessionCookie(t *testing.T, res response) *http.Cookie {
	t.Helper()
	for _, line := range res.header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err == nil && c.Name == ui.CookieName {
			return c
		}
	}
	return nil
}

func TestUI_Login(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("pages need a session", func(t *testing.T) {
		res := b.client().get("/ui/dead?channel=hooks")
		if res.status != http.StatusSeeOther {
			t.Fatalf("status %d, want 303", res.status)
		}
		if got, want := res.header.Get("Location"), "/ui/login?next="+url.QueryEscape("/ui/dead?channel=hooks"); got != want {
			t.Errorf("Location %q, want %q", got, want)
		}
	})
	t.Run("wrong token is refused", func(t *testing.T) {
		for _, tok := range []string{"not-the-token", "", testToken + "x", strings.ToUpper(testToken)} {
			c := b.client()
			res := c.login(tok)
			if res.status != http.StatusUnauthorized {
				t.Errorf("token %q: status %d, want 401", tok, res.status)
			}
			if !strings.Contains(res.body, "not one of the API tokens") {
				t.Errorf("token %q: the page does not say the token is wrong:\n%s", tok, res.body)
			}
			if c := sessionCookie(t, res); c != nil {
				t.Errorf("token %q: got a session cookie %v", tok, c)
			}
			if res := c.get("/ui/"); res.status != http.StatusSeeOther {
				t.Errorf("token %q: after the refused login /ui/ answers %d, want 303 to the login form", tok, res.status)
			}
		}
	})
	t.Run("a login form past 64 KiB is not read", func(t *testing.T) {
		// Read before anyone is known, it was bounded as any form, at 1 MiB.
		res := b.client().post("/ui/login", url.Values{"token": {testToken}, "next": {"/ui/" + strings.Repeat("x", 64<<10)}})
		if res.status != http.StatusBadRequest || !strings.Contains(res.body, "Could not read the login form") {
			t.Errorf("a 64 KiB login form: status %d, want 400 saying the form could not be read:\n%.300s", res.status, res.body)
		}
	})
	t.Run("right token gives a strict HttpOnly session cookie", func(t *testing.T) {
		c := b.client()
		res := c.login(testToken)
		if res.status != http.StatusSeeOther || res.header.Get("Location") != "/ui/" {
			t.Fatalf("status %d Location %q, want 303 to /ui/", res.status, res.header.Get("Location"))
		}
		ck := sessionCookie(t, res)
		if ck == nil {
			t.Fatal("no session cookie")
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != ui.Prefix {
			t.Errorf("cookie HttpOnly=%v SameSite=%v Path=%q, want true, Strict, %q", ck.HttpOnly, ck.SameSite, ck.Path, ui.Prefix)
		}
		if ck.Secure {
			t.Error("cookie is Secure on plain HTTP: the browser would never send it back")
		}
		if len(ck.Value) < 40 || strings.Contains(ck.Value, testToken) {
			t.Errorf("cookie value %q: want a long random id, not the token", ck.Value)
		}
		if res := c.get("/ui/"); res.status != http.StatusOK || !strings.Contains(res.body, "Channels") {
			t.Errorf("channels page after login: status %d", res.status)
		}
	})
	t.Run("every login gets a fresh session id", func(t *testing.T) {
		c1 := sessionCookie(t, b.client().login(testToken))
		c2 := sessionCookie(t, b.client().login(testToken))
		if c1 == nil || c2 == nil || c1.Value == c2.Value {
			t.Errorf("session ids %v and %v, want two different ones", c1, c2)
		}
	})
	t.Run("next stays inside the dashboard", func(t *testing.T) {
		for next, want := range map[string]string{
			"/ui/dead?channel=hooks": "/ui/dead?channel=hooks",
			"//evil.example/ui/":     "/ui/",
			"https://evil.example/":  "/ui/",
			"/ui/\\evil":             "/ui/",
			"/metrics":               "/ui/",
		} {
			res := b.client().post("/ui/login", url.Values{"token": {testToken}, "next": {next}})
			if got := res.header.Get("Location"); got != want {
				t.Errorf("next=%q: redirected to %q, want %q", next, got, want)
			}
		}
	})
	t.Run("logout ends the session", func(t *testing.T) {
		c, csrf := b.loggedIn()
		res := c.post("/ui/logout", url.Values{"csrf": {csrf}})
		if res.status != http.StatusSeeOther || res.header.Get("Location") != "/ui/login" {
			t.Fatalf("logout: status %d Location %q", res.status, res.header.Get("Location"))
		}
		if ck := sessionCookie(t, res); ck == nil || ck.MaxAge >= 0 {
			t.Errorf("logout cookie %v, want the session cookie expired", ck)
		}
		if res := c.get("/ui/"); res.status != http.StatusSeeOther {
			t.Errorf("after logout /ui/ answers %d, want 303 to the login form", res.status)
		}
	})
	t.Run("security headers", func(t *testing.T) {
		res := b.client().get("/ui/login")
		csp := res.header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
			}
		}
		if got := res.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("X-Content-Type-Options %q, want nosniff", got)
		}
	})
	t.Run("assets are embedded and need no session", func(t *testing.T) {
		for _, path := range []string{"/ui/assets/ui.css", "/ui/assets/ui.js", "/ui/assets/icon.svg"} {
			if res := b.client().get(path); res.status != http.StatusOK || len(res.body) < 100 {
				t.Errorf("%s: status %d, %d bytes", path, res.status, len(res.body))
			}
		}
		if res := b.client().get("/ui/assets/"); res.status != http.StatusNotFound {
			t.Errorf("asset directory listing: status %d, want 404", res.status)
		}
	})
}

// An empty entry in the token list (an unset variable) logs no one in.
// Config validation refuses one, so notifyd never runs with it; the
// dashboard must not rely on that (withEmptyTokenConfigured).
func TestUI_LoginEmptyTokenConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t, withEmptyTokenConfigured())
	c := b.client()
	res := c.login("")
	if res.status != http.StatusUnauthorized || !strings.Contains(res.body, "not one of the API tokens") {
		t.Errorf("token \"\": status %d, want 401 saying the token is wrong; body:\n%s", res.status, res.body)
	}
	if ck := sessionCookie(t, res); ck != nil {
		t.Errorf("token \"\": got a session cookie %v", ck)
	}
	if res := c.get("/ui/"); res.status != http.StatusSeeOther {
		t.Errorf("token \"\": after the refused login /ui/ answers %d, want 303 to the login form", res.status)
	}
	if res := b.client().login(testToken); res.status != http.StatusSeeOther {
		t.Errorf("the configured token beside \"\": status %d, want 303 (logged in)", res.status)
	}
}

func TestUI_LoginTLS(t *testing.T) {
	t.Parallel()
	b := setup(t, withTLS())
	ck := sessionCookie(t, b.client().login(testToken))
	if ck == nil || !ck.Secure {
		t.Errorf("cookie over TLS %v, want Secure", ck)
	}
}

// Behind a TLS-terminating proxy the session cookie is Secure, but only
// when the proxy is trusted: anyone else's X-Forwarded-Proto is ignored.
func TestUI_LoginBehindProxy(t *testing.T) {
	t.Parallel()
	viaProxy := func(b *bundle) *http.Cookie {
		t.Helper()
		return sessionCookie(t, b.client().post("/ui/login", url.Values{"token": {testToken}, "next": {"/ui/"}},
			"X-Forwarded-Proto", "https", "X-Forwarded-For", "198.51.100.7"))
	}
	if ck := viaProxy(setup(t, withTrustedProxies("127.0.0.1/32"))); ck == nil || !ck.Secure {
		t.Errorf("cookie behind a trusted TLS proxy %v, want Secure", ck)
	}
	if ck := viaProxy(setup(t)); ck == nil || ck.Secure {
		t.Errorf("cookie with an untrusted X-Forwarded-Proto %v, want not Secure (the header is ignored)", ck)
	}
}

// Failed logins from one client are throttled; a client behind a trusted
// proxy is told apart by X-Forwarded-For.
func TestUI_LoginThrottle(t *testing.T) {
	t.Parallel()
	b := setup(t, withTrustedProxies("127.0.0.1/32"))
	from := func(ip, token string) response {
		return b.client().post("/ui/login", url.Values{"token": {token}, "next": {"/ui/"}}, "X-Forwarded-For", ip)
	}
	for range 10 {
		if res := from("198.51.100.7", "wrong-token-0123456789"); res.status != http.StatusUnauthorized {
			t.Fatalf("a wrong token: status %d, want 401", res.status)
		}
	}
	res := from("198.51.100.7", "wrong-token-again-0123456789")
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") == "" || !strings.Contains(res.body, "Too many failed logins") {
		t.Errorf("11th failed login from the same client: status %d (Retry-After %q), want 429 saying why", res.status, res.header.Get("Retry-After"))
	}
	// The right token is never refused for the failures of others behind
	// the same address; the failing ones still are.
	if res := from("198.51.100.7", testToken); res.status != http.StatusSeeOther {
		t.Errorf("the right token from the throttled client: status %d, want 303 (logged in)", res.status)
	}
	if res := from("198.51.100.7", "wrong-token-third-0123456789"); res.status != http.StatusTooManyRequests {
		t.Errorf("a wrong token after the right one: status %d, want 429 still", res.status)
	}
	if res := from("198.51.100.8", testToken); res.status != http.StatusSeeOther {
		t.Errorf("another client behind the proxy: status %d, want 303 (logged in)", res.status)
	}
}

// Without a trusted proxy every browser on the host is 127.0.0.1: someone
// guessing there must not lock the operator out.
func TestUI_LoginThrottleSharedAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	login := func(token string) response {
		return b.client().post("/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
	}
	for range 10 {
		if res := login("wrong-token-0123456789"); res.status != http.StatusUnauthorized {
			t.Fatalf("a wrong token: status %d, want 401", res.status)
		}
	}
	if res := login("wrong-token-0123456789"); res.status != http.StatusTooManyRequests {
		t.Errorf("11th wrong token from 127.0.0.1: status %d, want 429", res.status)
	}
	if res := login(testToken); res.status != http.StatusSeeOther {
		t.Errorf("the right token from 127.0.0.1 after others' failures: status %d, want 303 (logged in)", res.status)
	}
}

func TestUI_CSRF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.forceFailed(testChannel, 1)[0]
	c, csrf := b.loggedIn()

	refused := []struct {
		name    string
		form    url.Values
		headers []string
	}{
		{"no token", url.Values{"one": {idStr(id)}}, nil},
		{"wrong token", url.Values{"one": {idStr(id)}, "csrf": {csrf + "x"}}, nil},
		{"another session's token", url.Values{"one": {idStr(id)}, "csrf": {func() string { _, s := b.loggedIn(); return s }()}}, nil},
		{"from another site", url.Values{"one": {idStr(id)}, "csrf": {csrf}},
			[]string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}},
		{"from another origin without fetch metadata", url.Values{"one": {idStr(id)}, "csrf": {csrf}},
			[]string{"Origin", "https://evil.example", "Sec-Fetch-Site", ""}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			res := c.post("/ui/dead/replay", tc.form, tc.headers...)
			if res.status != http.StatusForbidden {
				t.Errorf("status %d, want 403", res.status)
			}
			if got := b.status(id); got != outbox.StatusFailed {
				t.Errorf("the refused replay changed the row: %s, want FAILED", got)
			}
		})
	}
	t.Run("login from another site", func(t *testing.T) {
		res := b.client().post("/ui/login", url.Values{"token": {testToken}}, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
		if res.status != http.StatusForbidden || sessionCookie(t, res) != nil {
			t.Errorf("status %d cookie %v, want 403 and no session", res.status, sessionCookie(t, res))
		}
	})
	t.Run("POST without a session", func(t *testing.T) {
		res := b.client().post("/ui/dead/replay", url.Values{"one": {idStr(id)}, "csrf": {csrf}})
		if res.status != http.StatusForbidden {
			t.Errorf("status %d, want 403", res.status)
		}
	})
	t.Run("the right token from the dashboard's own page", func(t *testing.T) {
		res := c.post("/ui/dead/replay", url.Values{"one": {idStr(id)}, "csrf": {csrf}})
		if res.status != http.StatusSeeOther {
			t.Fatalf("status %d, want 303; body:\n%s", res.status, res.body)
		}
		if got := b.status(id); got == outbox.StatusFailed {
			t.Errorf("row still FAILED after an accepted replay")
		}
	})
}

func TestUI_SessionExpiry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	b := setup(t, withNow(clock))

	t.Run("idle", func(t *testing.T) {
		c, _ := b.loggedIn()
		advance(ui.SessionIdleDefault - time.Minute)
		if res := c.get("/ui/lookup"); res.status != http.StatusOK {
			t.Fatalf("just before the idle timeout: status %d, want 200", res.status)
		}
		advance(ui.SessionIdleDefault - time.Minute) // idle again, from the last request
		if res := c.get("/ui/lookup"); res.status != http.StatusOK {
			t.Fatalf("a request renews the idle timeout: status %d, want 200", res.status)
		}
		advance(ui.SessionIdleDefault)
		if res := c.get("/ui/lookup"); res.status != http.StatusSeeOther {
			t.Errorf("after the idle timeout: status %d, want 303 to the login form", res.status)
		}
	})
	t.Run("lifetime", func(t *testing.T) {
		c, _ := b.loggedIn()
		for elapsed := time.Duration(0); elapsed < ui.SessionMaxDefault-time.Hour; elapsed += time.Hour {
			advance(time.Hour)
			if res := c.get("/ui/lookup"); res.status != http.StatusOK {
				t.Fatalf("after %s of use: status %d, want 200", elapsed+time.Hour, res.status)
			}
		}
		advance(time.Hour)
		if res := c.get("/ui/lookup"); res.status != http.StatusSeeOther {
			t.Errorf("after the session's lifetime: status %d, want 303 to the login form", res.status)
		}
	})
}

func idStr(id int64) string { return strconv.FormatInt(id, 10) }
