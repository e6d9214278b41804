package ui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/notifyd/notifyd/internal/httpguard"
)

// CookieName is the session cookie. Its value is a random session id; the
// session itself (CSRF token, expiry) stays on the server.
const CookieName = "notifyd_ui_session"

// maxFormBytes bounds a POSTed form: a page of selected ids fits many times.
// maxLoginBytes bounds the login form, read before anyone is known: a token
// and the page to return to, which came in a URL (within the server's
// 64 KiB header block).
const (
	maxFormBytes  = 1 << 20
	maxLoginBytes = 64 << 10
)

// session is one logged-in browser.
type session struct {
	key      [sha256.Size]byte // sha256 of the cookie value; the map key
	client   string            // who logged in (httpguard.Proxies.ClientIP)
	csrf     string
	created  time.Time
	lastSeen time.Time
	flash    *flash
}

// flash is a one-time message shown on the next page a session renders.
type flash struct {
	Text  string
	Error bool
	Link  string // optional: where to look next
}

// sessions is the in-memory session store. Sessions are per process: a
// restart, or a request that lands on another instance, asks to log in again.
type sessions struct {
	idle, max time.Duration
	now       func() time.Time

	mu        sync.Mutex
	m         map[[sha256.Size]byte]*session
	byClient  map[string]int // live sessions of each client holding any
	lastSweep time.Time
}

// The sessions the store keeps: each login creates one, kept for
// SessionIdle (2 h) unless used, so a script logging in with a valid token
// on every request grew the store without bound (a million logins, about
// 400 MB). Past a bound the least recently used session goes: the
// client's own past its share, anyone's past the whole.
const (
	maxSessions       = 10_000
	maxClientSessions = 100
)

func newSessions(idle, max time.Duration, now func() time.Time) *sessions {
	return &sessions{idle: idle, max: max, now: now, m: map[[sha256.Size]byte]*session{}, byClient: map[string]int{}}
}

// randomToken is 32 random bytes, URL-safe base64.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns it with the cookie value that names
// it. The store keeps only the value's digest, so a dump of the map (or a
// timing side channel on the map lookup) does not give out live ids.
//
// client is who logged in: one client keeps at most maxClientSessions
// (its least recently used goes first), and the store at most maxSessions.
func (ss *sessions) create(client string) (*session, string) {
	id := randomToken()
	now := ss.now()
	s := &session{key: sha256.Sum256([]byte(id)), client: client, csrf: randomToken(), created: now, lastSeen: now}
	ss.mu.Lock()
	// Only create grows the map, so sweeping here bounds it: no goroutine
	// of its own, nothing to stop.
	if now.Sub(ss.lastSweep) >= sweepEvery {
		ss.sweepLocked(now)
	}
	if ss.byClient[client] >= maxClientSessions {
		ss.evictLocked(client)
	}
	if len(ss.m) >= maxSessions {
		ss.evictLocked("")
	}
	ss.m[s.key] = s
	ss.byClient[client]++
	ss.mu.Unlock()
	return s, id
}

// evictLocked drops the least recently used session of client ("": of
// anyone).
func (ss *sessions) evictLocked(client string) {
	var lru *session
	for _, s := range ss.m {
		if (client == "" || s.client == client) && (lru == nil || s.lastSeen.Before(lru.lastSeen)) {
			lru = s
		}
	}
	if lru != nil {
		ss.deleteLocked(lru)
	}
}

func (ss *sessions) deleteLocked(s *session) {
	if _, ok := ss.m[s.key]; !ok {
		return
	}
	delete(ss.m, s.key)
	if ss.byClient[s.client]--; ss.byClient[s.client] <= 0 {
		delete(ss.byClient, s.client)
	}
}

// lookup returns the live session named by the cookie value id and marks it
// used, or nil.
func (ss *sessions) lookup(id string) *session {
	if id == "" {
		return nil
	}
	key := sha256.Sum256([]byte(id))
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[key]
	if !ok {
		return nil
	}
	if ss.expired(s, now) {
		ss.deleteLocked(s)
		return nil
	}
	s.lastSeen = now
	return s
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	return now.Sub(s.lastSeen) >= ss.idle || now.Sub(s.created) >= ss.max
}

// fromRequest is the request's live session, or nil. It does not mark the
// session used (error pages call it).
func (ss *sessions) fromRequest(r *http.Request) *session {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return nil
	}
	key := sha256.Sum256([]byte(c.Value))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[key]
	if !ok || ss.expired(s, ss.now()) {
		return nil
	}
	return s
}

func (ss *sessions) remove(s *session) {
	ss.mu.Lock()
	ss.deleteLocked(s)
	ss.mu.Unlock()
}

// sweep drops expired sessions.
func (ss *sessions) sweep() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweepLocked(ss.now())
}

func (ss *sessions) sweepLocked(now time.Time) {
	ss.lastSweep = now
	for _, s := range ss.m {
		if ss.expired(s, now) {
			ss.deleteLocked(s)
		}
	}
}

func (ss *sessions) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.m)
}

func (ss *sessions) setFlash(s *session, f *flash) {
	ss.mu.Lock()
	s.flash = f
	ss.mu.Unlock()
}

func (ss *sessions) popFlash(s *session) *flash {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}

// tokenOK says whether presented is one of http.tokens. It hashes first
// (constant time whatever the lengths) and compares against every token
// without stopping, so timing does not tell which one matched.
func (s *server) tokenOK(presented string) bool {
	if presented == "" {
		return false
	}
	d := sha256.Sum256([]byte(presented))
	match := 0
	for i := range s.tokens {
		match |= subtle.ConstantTimeCompare(d[:], s.tokens[i][:])
	}
	return match == 1
}

// requireSession lets a request through only with a live session. A GET
// without one goes to the login form (and back afterwards); a POST without
// one, or without the session's CSRF token, is refused.
func (s *server) requireSession(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sess *session
		if c, err := r.Cookie(CookieName); err == nil {
			sess = s.sessions.lookup(c.Value)
		}
		if sess == nil {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()))
				return
			}
			s.fail(w, r, http.StatusForbidden, "You are not logged in (or your session expired). Log in and try again.")
			return
		}
		// A logged-in operator's: not closed to admit another, and its form
		// may take its whole share of the in-flight bound.
		if err := httpguard.Serving(r.Context()); err != nil {
			s.busy(w, r, err)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				s.fail(w, r, http.StatusBadRequest, "Could not read the form: "+err.Error())
				return
			}
			got := r.PostForm.Get("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
				s.fail(w, r, http.StatusForbidden, "The form's CSRF token is missing or stale. Reload the page and submit it again.")
				return
			}
		}
		h(w, r, sess)
	})
}

type loginData struct {
	Next  string
	Error string
}

func (s *server) loginForm(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if sess := s.sessions.fromRequest(r); sess != nil {
		redirect(w, r, next)
		return
	}
	s.render(w, r, http.StatusOK, "login", nil, view{Title: "Log in", Data: loginData{Next: next}})
}

// login checks the token and starts a session. Cross-site logins are
// already refused by the origin check that wraps every handler.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "Could not read the login form: "+err.Error())
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	who := s.proxies.ClientIP(r)
	// The token is checked before the throttle: a right token logs in
	// whatever others behind the same address failed; only failures are
	// counted and refused (docs/design.md §10).
	if !s.tokenOK(strings.TrimSpace(r.PostForm.Get("token"))) {
		if wait := s.throttle.Blocked(who); wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			s.render(w, r, http.StatusTooManyRequests, "login", nil, view{Title: "Log in",
				Data: loginData{Next: next, Error: fmt.Sprintf("Too many failed logins from %s; try again in %s.", who, wait.Round(time.Second))}})
			return
		}
		s.throttle.Fail(who)
		s.log.Warn("dashboard login refused: token is not one of http.tokens", "remote", who)
		s.render(w, r, http.StatusUnauthorized, "login", nil, view{Title: "Log in",
			Data: loginData{Next: next, Error: "That token is not one of the API tokens (http.tokens)."}})
		return
	}
	// A fresh id on every login, so an id planted before login is useless.
	if old := s.sessions.fromRequest(r); old != nil {
		s.sessions.remove(old)
	}
	_, id := s.sessions.create(who)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: Prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.proxies.HTTPS(r),
	})
	s.log.Info("dashboard login", "remote", who)
	redirect(w, r, next)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	s.sessions.remove(sess)
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.proxies.HTTPS(r),
	})
	redirect(w, r, "/ui/login")
}

// safeNext keeps a post-login redirect inside the dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(u.Path, "//") {
		return Prefix
	}
	return next
}
