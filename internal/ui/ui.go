// Package ui is notifyd's web dashboard, served at /ui/ next to the HTTP
// API: per-channel queue depths, throughput and plugin health; the
// dead-letter queue with replay and purge; schedules and bulk-job progress;
// and lookup of one notification with its attempt history.
//
// Pages are server-rendered html/template; a few lines of plain JS (embedded,
// like the stylesheet) refresh the live pages and tick checkboxes, and every
// page works without it. Operators log in with one of the API's tokens
// (http.tokens) and get a server-side session; every POST carries the
// session's CSRF token and must come from the dashboard's own origin.
package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Prefix is the path the dashboard is served under: mount the handler New
// returns with mux.Handle(ui.Prefix, h).
const Prefix = "/ui/"

// Defaults for Deps.
const (
	SessionIdleDefault = 2 * time.Hour
	SessionMaxDefault  = 24 * time.Hour
)

// sweepEvery is how often expired sessions are dropped (when a session is
// created: only that grows the store).
const sweepEvery = 5 * time.Second

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Deps is what the dashboard reads and acts on. Config and Ops are
// required; an Ops without schedules (service.ErrNoSchedules) or plugins
// makes the pages that need them say so instead of showing that part.
type Deps struct {
	Config *config.Config // channels, http.tokens, jobs.stuck_after
	// Ops runs every operation a page shows or a form performs (the
	// daemon's *service.Service, or *notifyd.Daemon): the dashboard is one
	// of its doors.
	Ops    service.Operations
	Logger hclog.Logger

	// SessionIdle logs a session out after this long without a request;
	// SessionMax after this long whatever happens.
	SessionIdle, SessionMax time.Duration
	// TrustedOrigins are origins (scheme://host[:port]) other than the
	// request's own that may POST, e.g. a reverse proxy's public name when
	// it rewrites Host.
	TrustedOrigins []string
	// Now is the clock (sessions, ages, stuck jobs); tests inject one.
	Now func() time.Time
}

// server is the dashboard: its dependencies, templates and sessions.
type server struct {
	d        Deps
	log      hclog.Logger
	now      func() time.Time
	tokens   [][sha256.Size]byte
	proxies  httpguard.Proxies   // whose X-Forwarded-* to believe
	throttle *httpguard.Throttle // failed logins per client
	sessions *sessions
	pages    map[string]*template.Template
	assets   fs.FS
	version  string // of the assets, for cache-busting URLs
	channels []string
}

// New builds the dashboard's handler, to be mounted at Prefix, and starts
// its throughput sampler. It fails when a required dependency is missing or
// no API token is configured (nobody could log in).
func New(d Deps) (http.Handler, error) {
	if d.Config == nil || d.Ops == nil {
		return nil, errors.New("ui: Deps.Config and Deps.Ops are required")
	}
	s := &server{
		d:   d,
		log: d.Logger,
		now: d.Now,
	}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	s.log = s.log.Named("ui")
	if s.now == nil {
		s.now = time.Now
	}
	for _, tok := range d.Config.HTTP.Tokens {
		if tok != "" { // an unset ${VAR} must never let "" in
			s.tokens = append(s.tokens, sha256.Sum256([]byte(tok)))
		}
	}
	proxies, perr := httpguard.ParseProxies(d.Config.HTTP.TrustedProxies)
	if perr != nil {
		return nil, fmt.Errorf("ui: %w", perr)
	}
	s.proxies, s.throttle = proxies, httpguard.NewThrottle(d.Config.HTTP.AuthFailuresPerMinute)
	if len(s.tokens) == 0 {
		return nil, errors.New("ui: http.tokens has no token; the dashboard logs in with one of the API's tokens")
	}
	for name := range d.Config.Channels {
		s.channels = append(s.channels, name)
	}
	slices.Sort(s.channels)

	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if s.assets, err = fs.Sub(assetFS, "assets"); err != nil {
		return nil, fmt.Errorf("ui: assets: %w", err)
	}
	if s.version, err = assetsVersion(s.assets); err != nil {
		return nil, err
	}
	s.sessions = newSessions(cmpOr(d.SessionIdle, SessionIdleDefault), cmpOr(d.SessionMax, SessionMaxDefault), s.now)

	cop := http.NewCrossOriginProtection()
	for _, o := range d.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("ui: trusted origin %q: %w", o, err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusForbidden, "This request came from another site (Origin/Sec-Fetch-Site), so it was refused. "+
			"Submit the form from the dashboard itself; behind a proxy that rewrites Host, list its origin in the dashboard's trusted origins.")
	}))
	return securityHeaders(cop.Handler(s.routes())), nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/login", s.loginForm)
	mux.HandleFunc("POST /ui/login", s.login)
	mux.Handle("GET /ui/assets/", http.StripPrefix("/ui/assets/", s.assetHandler()))

	authed := func(pattern string, h func(http.ResponseWriter, *http.Request, *session)) {
		mux.Handle(pattern, s.requireSession(func(w http.ResponseWriter, r *http.Request, se *session) {
			if msg := badText(r); msg != "" {
				s.fail(w, r, http.StatusBadRequest, msg)
				return
			}
			h(w, r, se)
		}))
	}
	authed("POST /ui/logout", s.logout)
	authed("GET /ui/{$}", s.channelsPage)
	authed("GET /ui/dead", s.deadPage)
	authed("POST /ui/dead/replay", s.deadReplay)
	authed("POST /ui/dead/purge", s.deadPurge)
	authed("GET /ui/jobs", s.jobsPage)
	authed("GET /ui/lookup", s.lookupPage)
	authed("GET /ui/n/{id}", s.notificationPage)
	authed("POST /ui/n/{id}/replay", s.notificationReplay)
	authed("POST /ui/n/{id}/cancel", s.notificationCancel)
	authed("/ui/", func(w http.ResponseWriter, r *http.Request, _ *session) {
		s.fail(w, r, http.StatusNotFound, "There is no dashboard page at "+r.URL.Path+".")
	})
	return mux
}

// badText says what in the request's path, query or form Postgres could not
// store as text ("" when nothing): such input gets a 400 page naming it, not
// a database error. A query string net/url cannot read whole (a `;` between
// parameters, a bad escape, more than 10,000 parameters) is refused too:
// URL.Query, which the pages read, drops the part at fault silently, so a
// filter was taken for none.
func badText(r *http.Request) string {
	if err := wire.CheckText(r.URL.Path); err != nil {
		return "The address " + err.Error() + "."
	}
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fmt.Sprintf("The address's query cannot be read: %v. Give name=value parameters joined by &.", err)
	}
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err == nil {
			vals = r.Form
		}
	}
	for k, vs := range vals {
		for _, v := range append([]string{k}, vs...) {
			if err := wire.CheckText(v); err != nil {
				return fmt.Sprintf("The field %s %s.", quote(strings.ToValidUTF8(k, "?")), err)
			}
		}
	}
	return ""
}

// securityHeaders forbids everything the pages do not need: no inline or
// foreign script or style, no framing, no foreign form targets.
func securityHeaders(h http.Handler) http.Handler {
	const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// assetHandler serves the embedded stylesheet and script. URLs carry the
// assets' digest (?v=…), so browsers may keep them for a long time.
func (s *server) assetHandler() http.Handler {
	files := http.FileServerFS(s.assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || r.URL.Path[len(r.URL.Path)-1] == '/' {
			http.NotFound(w, r) // no directory listings
			return
		}
		if r.URL.Query().Get("v") == s.version {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}

func assetsVersion(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("ui: read assets: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)[:6]), nil
}

// view is what every page template gets.
type view struct {
	Title    string
	Nav      string // which menu entry is current
	CSRF     string // "" when logged out
	Flash    *flash
	Refresh  int // seconds between live refreshes of <main>; 0 = none
	Version  string
	Now      time.Time
	Channels []string // configured channels, for filters
	Data     any
}

// render writes page with status. Templates execute into a buffer first, so
// a template error becomes a clean 500 rather than half a page.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, page string, sess *session, v view) {
	v.Version, v.Now, v.Channels = s.version, s.now(), s.channels
	if sess != nil {
		v.CSRF = sess.csrf
		if v.Flash == nil {
			v.Flash = s.sessions.popFlash(sess)
		}
	}
	t, ok := s.pages[page]
	if !ok {
		s.log.Error("no such page template", "page", page)
		http.Error(w, "internal error: no template "+page, http.StatusInternalServerError)
		return
	}
	// An error page (its message bounded, wire.MaxErrorMessage) is not
	// charged: it is what a page that could not have its bytes answers.
	charged := page != "error"
	buf := chargedBuffer{ctx: r.Context(), off: !charged}
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		s.log.Error("render page", "page", page, "error", err)
		http.Error(w, "internal error rendering "+page+"; see the notifyd log", http.StatusInternalServerError)
		return
	}
	// A page that holds its read bound of the bound on answers in flight
	// holds the rendered page's size instead while it is written: less for
	// small rows, more for text HTML escapes (httpguard.Encoded).
	if charged {
		httpguard.Encoded(r.Context(), int64(buf.Len()))
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// chargedBuffer is a page being rendered: a request that holds any of the
// bound on answers in flight (a page of rows, one notification) holds what
// the page has grown to as well, in steps of renderStep, while its rows are
// still held (httpguard.Grow). HTML's escapes make a page several times
// the text it shows (`"` is 5 bytes): a notification's page of 9 MiB of
// rows rendered 34 MiB outside the bound.
type chargedBuffer struct {
	bytes.Buffer
	ctx     context.Context
	off     bool // charges nothing
	charged int64
}

// renderStep is how much more of the bound a page takes each time it grows
// past what it holds.
const renderStep = 1 << 20

// charge takes the bound's bytes for n more bytes of page, if they are free
// (httpguard.Grow: never waited for while the rows are held).
func (b *chargedBuffer) charge(n int) {
	need := int64(b.Len() + n)
	if b.off || need <= b.charged {
		return
	}
	more := max(need-b.charged, renderStep)
	httpguard.Grow(b.ctx, more)
	b.charged += more
}

func (b *chargedBuffer) Write(p []byte) (int, error) {
	b.charge(len(p))
	return b.Buffer.Write(p)
}

func (b *chargedBuffer) WriteString(p string) (int, error) {
	b.charge(len(p))
	return b.Buffer.WriteString(p)
}

// fail renders an error page saying what was wrong.
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	sess := s.sessions.fromRequest(r)
	msg = wire.Truncate(msg, wire.MaxErrorMessage)
	s.render(w, r, status, "error", sess, view{Title: http.StatusText(status), Data: msg})
}

// outageRetryAfter is the Retry-After, in seconds, of the unavailable page.
const outageRetryAfter = 1

// failErr logs an unexpected error and renders it (operators are
// authenticated admins: the error text helps them more than it leaks).
//
// An outage of Postgres or Redis (httpguard.Outage, the API's rule too) is
// a 503 page saying to retry, with Retry-After, not a 500.
func (s *server) failErr(w http.ResponseWriter, r *http.Request, op string, err error) {
	if httpguard.Outage(r.Context(), err) {
		s.log.Warn(op+": a dependency is unavailable", "error", err)
		w.Header().Set("Retry-After", strconv.Itoa(outageRetryAfter))
		s.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf(
			"Unavailable: Postgres or Redis cannot be reached right now (%s). Retry in a moment; the page works again once it answers.", op))
		return
	}
	s.log.Error(op, "error", err)
	s.fail(w, r, http.StatusInternalServerError, op+": "+err.Error())
}

// holdPage holds what a page of at most limit rows of rowBytes each may
// read (httpguard.PageCharge) of the bound on answers in flight, which the
// API's handler carries for the dashboard as for its own pages
// (httpguard.Answers), until the page is rendered: call release then. When
// the bound stays full it renders a 503 page naming it, with Retry-After,
// and ok is false.
func (s *server) holdPage(w http.ResponseWriter, r *http.Request, limit int, rowBytes int64) (release func(), ok bool) {
	return s.hold(w, r, httpguard.PageCharge(limit, rowBytes))
}

// hold is holdPage for a charge of n bytes: what a page that reads one row
// alone holds (a notification with its attempt log:
// httpguard.NotificationGetBytes), as the API's own reads of one row do.
func (s *server) hold(w http.ResponseWriter, r *http.Request, n int64) (release func(), ok bool) {
	release, err := httpguard.HoldAnswer(r.Context(), n)
	if err != nil {
		s.busy(w, r, err)
		return nil, false
	}
	return release, true
}

// busy renders a bound that stayed full (httpguard.Busy) as a 503 page
// naming it, with Retry-After.
func (s *server) busy(w http.ResponseWriter, r *http.Request, err error) {
	var busy *httpguard.Busy
	if errors.As(err, &busy) {
		w.Header().Set("Retry-After", strconv.Itoa(busy.RetryAfter))
	}
	s.fail(w, r, http.StatusServiceUnavailable, "Unavailable: "+err.Error()+".")
}

// redirect answers a POST with 303 See Other, so reloading the next page
// does not resubmit the form.
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (s *server) configured(channel string) bool {
	_, ok := slices.BinarySearch(s.channels, channel)
	return ok
}
