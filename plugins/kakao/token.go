package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/sdk"
)

// tokenSource holds a channel's OAuth tokens and refreshes the access token
// when Kakao rejects it. However many sends hit -401 at once, one refresh
// runs: each send remembers the generation of the token it used, and a send
// whose generation is already stale just picks up the newer token.
type tokenSource struct {
	client       *http.Client
	tokenURL     string
	clientID     string
	clientSecret string
	timeout      time.Duration
	store        *tokenFile // nil: rotated tokens live in memory only
	logger       hclog.Logger
	now          func() time.Time

	mu       sync.Mutex
	access   string
	refresh  string
	gen      uint64
	inflight *refreshCall
	// secrets holds every token value this process used, the client
	// secret and the config's tokens, for redact. Rotated-out tokens are
	// retired, never dropped while in use.
	secrets sdk.Redactor
	// refreshed is when the current access token was obtained by a refresh.
	refreshed time.Time
	// dead is the final error of refreshing with the current refresh token:
	// Kakao will not change its mind, and its token endpoint is rate limited.
	dead *refreshError
	// expires is when the current access token lapses: from the refresh's
	// expires_in, or (a token from the config, whose age is unknown) the
	// configure time plus accessLifetime.
	expires time.Time
}

// Kakao's token lifetimes (REST API): an access token lives 6 hours, a
// refresh token 2 months, and a refresh within the refresh token's last
// month also issues a new one.
// https://developers.kakao.com/docs/latest/en/kakaologin/common#token
const (
	accessLifetime = 6 * time.Hour
	// refreshAhead: the keeper refreshes this long before the access token
	// lapses.
	refreshAhead = 10 * time.Minute
	// keepTick is how often the keeper looks at the clock; keepRetry is its
	// wait after a refresh that failed transiently.
	keepTick  = time.Minute
	keepRetry = 5 * time.Minute
)

// keep refreshes the access token ahead of its expiry until ctx ends or
// Kakao refuses the refresh token for good. Each refresh gets a 6-hour
// token, so an idle channel refreshes four times a day; and since a refresh
// in the refresh token's last month rotates it, the channel never lapses
// however long it sits idle (a send would otherwise find both tokens dead
// after two months). tick is how often it looks (keepTick; tests shorten
// it).
func (ts *tokenSource) keep(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	var retryAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ts.mu.Lock()
		due := ts.now().After(ts.expires.Add(-refreshAhead)) && ts.now().After(retryAt)
		gen, dead, hasRefresh := ts.gen, ts.dead != nil, ts.refresh != ""
		ts.mu.Unlock()
		if dead || !hasRefresh {
			return
		}
		if !due {
			continue
		}
		if _, _, err := ts.refreshFrom(ctx, gen); err != nil {
			retryAt = ts.now().Add(keepRetry)
			ts.logger.Warn("kakao: refreshing the access token ahead of its expiry failed; trying again later", "error", ts.redact(err.Error()))
		}
	}
}

// refreshCooldown: a token Kakao rejects this soon after issuing it is not
// expired — the app key or client_id is wrong — and refreshing again would
// only spend Kakao's per-user token quota.
const refreshCooldown = time.Minute

// refreshCall is one refresh in flight; done is closed when its fields are set.
type refreshCall struct {
	done   chan struct{}
	access string
	gen    uint64
	err    error
}

// refreshError is a failed refresh. Transient failures (network, 5xx, 429)
// are worth retrying the message for; the rest need the operator.
type refreshError struct {
	transient bool
	status    int
	code      string // Kakao's error_code, e.g. KOE322
	oauth     string // the OAuth error, e.g. invalid_grant
	detail    string
	// rotated is a new refresh token that came in an answer whose access
	// token cannot be used: Kakao expired the old one when it issued it, so
	// it is kept all the same (run), or the next refresh is invalid_grant.
	rotated string
}

// final reports whether the refresh token (or the app's credentials) are
// refused for good: only invalid_grant (the refresh token is expired or
// revoked) and invalid_client (the app key is wrong) are, answered with a
// 4xx that is itself final. Anything else — a 5xx or a throttle (429)
// whatever its body says, an unexpected 4xx — may pass, and latching it
// would kill a channel that a later refresh would revive (a 503 saying
// invalid_grant once did, while its message was retried).
func (e *refreshError) final() bool {
	return e.status/100 == 4 && !e.transient && (e.oauth == "invalid_grant" || e.oauth == "invalid_client")
}

func (e *refreshError) Error() string { return e.detail }

// errNoRefreshToken: Kakao rejected the access token and there is no
// refresh_token to get another.
var errNoRefreshToken = errors.New("no refresh_token configured to replace the rejected access token")

func newTokenSource(c *config, client *http.Client, store *tokenFile, logger hclog.Logger, now func() time.Time) *tokenSource {
	ts := &tokenSource{
		client:       client,
		tokenURL:     c.authURL + "/oauth/token",
		clientID:     c.clientID,
		clientSecret: c.clientSecret,
		timeout:      c.timeout,
		store:        store,
		logger:       logger,
		now:          now,
		access:       c.accessToken,
		refresh:      c.refreshToken,
		expires:      now().Add(accessLifetime),
	}
	ts.secrets.Add(c.accessToken, c.refreshToken, c.clientSecret, c.clientID)
	return ts
}

// current returns the access token to use and its generation. With only a
// refresh token configured, the first call fetches an access token.
func (ts *tokenSource) current(ctx context.Context) (string, uint64, error) {
	ts.mu.Lock()
	access, gen := ts.access, ts.gen
	ts.mu.Unlock()
	if access != "" {
		return access, gen, nil
	}
	return ts.refreshFrom(ctx, gen)
}

// refreshFrom replaces the access token of generation gen and returns the new
// one. If gen is already stale, another send refreshed it: the newer token is
// returned without a second refresh. The refresh itself runs detached from
// ctx (bounded by the channel timeout) so one message's deadline cannot abort
// a refresh that other sends are waiting for.
func (ts *tokenSource) refreshFrom(ctx context.Context, gen uint64) (string, uint64, error) {
	ts.mu.Lock()
	if ts.gen != gen && ts.access != "" {
		access, cur := ts.access, ts.gen
		ts.mu.Unlock()
		return access, cur, nil
	}
	if ts.refresh == "" {
		ts.mu.Unlock()
		return "", 0, errNoRefreshToken
	}
	if ts.dead != nil {
		err := ts.dead
		ts.mu.Unlock()
		return "", 0, err
	}
	if since := ts.now().Sub(ts.refreshed); ts.inflight == nil && !ts.refreshed.IsZero() && since < refreshCooldown {
		ts.mu.Unlock()
		return "", 0, &refreshError{detail: fmt.Sprintf("Kakao rejected an access token refreshed %s ago; not refreshing again (does client_id belong to the token's app?)", since.Round(time.Second))}
	}
	call := ts.inflight
	if call == nil {
		call = &refreshCall{done: make(chan struct{})}
		ts.inflight = call
		go ts.run(context.WithoutCancel(ctx), call, ts.refresh)
	}
	ts.mu.Unlock()

	select {
	case <-call.done:
		return call.access, call.gen, call.err
	case <-ctx.Done():
		return "", 0, &refreshError{transient: true, detail: fmt.Sprintf("waiting for the access token refresh: %v", ctx.Err())}
	}
}

func (ts *tokenSource) run(ctx context.Context, call *refreshCall, refreshToken string) {
	ctx, cancel := context.WithTimeout(ctx, ts.timeout)
	defer cancel()
	tok, err := ts.requestToken(ctx, refreshToken)

	ts.mu.Lock()
	if err == nil {
		ts.secrets.Add(tok.access())
		ts.secrets.Retire(ts.access)
		ts.access = tok.access()
		rotated := tok.refresh() != "" && tok.refresh() != ts.refresh
		if tok.refresh() != "" {
			ts.secrets.Add(tok.refresh())
			ts.secrets.Retire(ts.refresh)
			ts.refresh = tok.refresh() // Kakao expires the old one at once
		}
		ts.gen++
		ts.refreshed = ts.now()
		life := time.Duration(tok.ExpiresIn) * time.Second
		if life <= 0 {
			life = accessLifetime
		}
		ts.expires = ts.refreshed.Add(life)
		if ts.store != nil {
			if perr := ts.store.save(ts.access, ts.refresh); perr != nil {
				ts.logger.Warn("kakao: could not persist the refreshed tokens; a restart will fall back to the config's", "token_file", ts.store.path, "error", ts.redact(perr.Error()))
			}
		}
		ts.logger.Info("kakao: access token refreshed", "generation", ts.gen, "refresh_token_rotated", rotated, "expires_in", tok.ExpiresIn)
	} else {
		// Only Kakao's own refusal is latched: a final transport error (an
		// untrusted certificate) ends with the operator's fix, not a new config.
		var re *refreshError
		if errors.As(err, &re) && re.final() {
			ts.dead = re
		}
		if re != nil && re.rotated != "" && re.rotated != ts.refresh {
			ts.secrets.Add(re.rotated)
			ts.secrets.Retire(ts.refresh)
			ts.refresh = re.rotated // Kakao expired the old one when it issued this
			if ts.store != nil {
				if perr := ts.store.save(ts.access, ts.refresh); perr != nil {
					ts.logger.Warn("kakao: could not persist the rotated refresh token; a restart will fall back to the config's", "token_file", ts.store.path, "error", ts.redact(perr.Error()))
				}
			}
			ts.logger.Info("kakao: refresh token rotated by an answer whose access token was not used", "refresh_token_rotated", true)
		}
		ts.logger.Warn("kakao: access token refresh failed", "error", ts.redact(err.Error()))
	}
	call.access, call.gen, call.err = ts.access, ts.gen, err
	ts.inflight = nil
	ts.mu.Unlock()
	close(call.done)
}

// tokenResponse is Kakao's answer to a refresh. refresh_token is present only
// when Kakao rotated it (when less than a month of its life was left).
// Only the tokens must be strings: a field the plugin merely reads the
// lifetime from, or does not read, must not throw the answer away, since
// Kakao expired the old refresh token when it issued the new one (an
// "expires_in":"21599" once lost it, and the channel with it).
//
// The tokens are read each on its own too: one that is not a JSON string
// (an access_token of 12345, an object) is no token, and the other is still
// read (json.Unmarshal failed for the whole answer, and a rotated refresh
// token beside such an access_token was lost with it).
type tokenResponse struct {
	AccessToken           tokenText `json:"access_token"`
	RefreshToken          tokenText `json:"refresh_token"`
	ExpiresIn             seconds   `json:"expires_in"`
	RefreshTokenExpiresIn seconds   `json:"refresh_token_expires_in"`
}

func (t *tokenResponse) access() string  { return string(t.AccessToken) }
func (t *tokenResponse) refresh() string { return string(t.RefreshToken) }

// tokenText is a token field: a JSON string, or "" for any other value
// (never an error, so the answer's other fields are still read).
type tokenText string

func (t *tokenText) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		s = ""
	}
	*t = tokenText(s)
	return nil
}

// seconds is a lifetime in seconds read leniently: a JSON number in any
// form, or a string holding one. Anything else, or a value that is not a
// positive count of at most maxSeconds, is 0: the caller's default.
type seconds int64

// maxSeconds bounds a lifetime (about 68 years) so it never overflows a
// time.Duration.
const maxSeconds = 1<<31 - 1

func (s *seconds) UnmarshalJSON(b []byte) error {
	*s = 0
	var n json.Number
	if json.Unmarshal(b, &n) != nil {
		var str string
		if json.Unmarshal(b, &str) != nil {
			return nil
		}
		n = json.Number(strings.TrimSpace(str))
	}
	if f, err := n.Float64(); err == nil && f >= 1 && f <= maxSeconds {
		*s = seconds(f)
	}
	return nil
}

// oauthError is kauth's error body.
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
	Code        string `json:"error_code"`
}

// requestToken is POST {auth_url}/oauth/token with grant_type=refresh_token.
func (ts *tokenSource) requestToken(ctx context.Context, refreshToken string) (*tokenResponse, error) {
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"client_id":     {ts.clientID},
		"refresh_token": {refreshToken},
	}
	if ts.clientSecret != "" {
		form.Set("client_secret", ts.clientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &refreshError{detail: fmt.Sprintf("build token refresh request: %v", err)}
	}
	req.Header.Set("Content-Type", formContentType)
	resp, err := ts.client.Do(req)
	if err != nil {
		// As any send: a TLS certificate the client rejects is final.
		v := sdk.ClassifyHTTP(nil, transportError(err))
		return nil, &refreshError{transient: v.Outcome == sdk.OutcomeTransient, detail: "token refresh " + v.Detail}
	}
	defer resp.Body.Close()
	verdict := sdk.ClassifyHTTP(resp, nil) // peeks at the body and puts it back
	body, err := readBody(ctx, resp, maxBody)
	if err != nil {
		return nil, &refreshError{transient: true, status: resp.StatusCode, detail: fmt.Sprintf("read token refresh response: %v", err)}
	}

	if verdict.Outcome == sdk.OutcomeSuccess {
		var tok tokenResponse
		decodeErr := json.Unmarshal(body, &tok)
		rotated := ""
		if decodeErr == nil && usableToken(tok.refresh()) {
			rotated = tok.refresh()
		}
		if decodeErr != nil || tok.AccessToken == "" {
			return nil, &refreshError{transient: true, status: resp.StatusCode, rotated: rotated,
				detail: fmt.Sprintf("token refresh answered HTTP %d without an access_token", resp.StatusCode)}
		}
		if !usableToken(tok.access()) {
			// Adopted, it failed every send inside the client (an invalid
			// header value) before Kakao could answer -401, so nothing ever
			// refreshed it again. The value stays out of the detail.
			return nil, &refreshError{transient: true, status: resp.StatusCode, rotated: rotated,
				detail: fmt.Sprintf("token refresh answered HTTP %d with an access_token that is no token (%d bytes; a token is 1–%d bytes of visible ASCII): not used", resp.StatusCode, len(tok.AccessToken), maxAccessToken)}
		}
		return &tok, nil
	}

	s := resp.StatusCode
	transient := verdict.Outcome == sdk.OutcomeTransient
	var oe oauthError
	if json.Unmarshal(body, &oe) == nil && oe.Error != "" {
		detail := fmt.Sprintf("token refresh rejected (HTTP %d): %s %s: %s", s, clean(oe.Error), clean(oe.Code), clean(oe.Description))
		if oe.Error == "invalid_grant" && !transient {
			detail += "; log the user in again and put the new tokens in the config"
		}
		return nil, &refreshError{transient: transient, status: s, code: oe.Code, oauth: oe.Error, detail: detail}
	}
	return nil, &refreshError{transient: transient, status: s,
		detail: fmt.Sprintf("token refresh answered HTTP %d: %s", s, clean(string(body)))}
}

// maxAccessToken bounds an access token taken from a refresh answer
// (Kakao's are under 100 bytes).
const maxAccessToken = 4 << 10

// usableToken reports whether s can go out as a bearer token: 1 to
// maxAccessToken bytes of visible ASCII. RFC 6750's b64token is narrower;
// this bound only keeps out what no header can carry or no token is.
func usableToken(s string) bool {
	if s == "" || len(s) > maxAccessToken {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// redact replaces every known secret in s. Every verdict detail and log line
// that may hold provider or transport text goes through it. It does not take
// mu (the Redactor has its own lock), so callers may hold it.
func (ts *tokenSource) redact(s string) string { return ts.secrets.Redact(s) }

// transportError drops the request URL from a *url.Error: the URL is ours and
// adds nothing, and keeping details short keeps them readable.
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
