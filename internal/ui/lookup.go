package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/jsonindent"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

const lookupPerPage = 50

// Lookup modes.
const (
	byAuto      = ""
	byID        = "id"
	byKey       = "key"
	byRecipient = "recipient"
)

type lookupData struct {
	Q       string
	By      string
	Rows    []service.Summary // a recipient's notifications, newest first
	Before  int64
	Next    int64  // before= of the next page; 0 = this is the last
	Message string // why nothing is shown
}

// lookupPage finds notifications by id, idempotency key or recipient. With
// by empty it tries them in that order; a single match goes straight to the
// notification's page.
func (s *server) lookupPage(w http.ResponseWriter, r *http.Request, sess *session) {
	qv := r.URL.Query()
	d := lookupData{Q: strings.TrimSpace(qv.Get("q")), By: qv.Get("by")}
	render := func(status int) {
		s.render(w, r, status, "lookup", sess, view{Title: "Lookup", Nav: "lookup", Data: d})
	}
	switch d.By {
	case byAuto, byID, byKey, byRecipient:
	default:
		d.Message = fmt.Sprintf("by=%s: look up by id, key or recipient.", quote(d.By))
		render(http.StatusBadRequest)
		return
	}
	if d.Q == "" {
		render(http.StatusOK)
		return
	}
	if len(d.Q) > wire.MaxRecipientLen {
		// Longer than any recipient or idempotency key notifyd stores.
		d.Message = fmt.Sprintf("The search is %d bytes long; no id, key or recipient is longer than %d.", len(d.Q), wire.MaxRecipientLen)
		d.Q = d.Q[:0]
		render(http.StatusBadRequest)
		return
	}
	before, err := queryInt(qv, "before", 0, 0, 1<<62)
	if err != nil {
		d.Message = err.Error()
		render(http.StatusBadRequest)
		return
	}
	d.Before = before

	id, idErr := strconv.ParseInt(d.Q, 10, 64)
	if d.By == byID && (idErr != nil || id <= 0) {
		d.Message = fmt.Sprintf("%s is not a notification id (a positive whole number).", quote(d.Q))
		render(http.StatusBadRequest)
		return
	}
	// A look-up by id or key reads what it needs to know the notification
	// exists, holding that read's bound of the bound on answers in flight
	// (findNotification).
	if (d.By == byID || d.By == byAuto) && idErr == nil && id > 0 {
		_, ok, err := s.findNotification(w, r, id, "")
		if !ok {
			return
		}
		if ok, err := found(err); err != nil {
			s.failErr(w, r, "look up notification by id", err)
			return
		} else if ok {
			redirect(w, r, "/ui/n/"+strconv.FormatInt(id, 10))
			return
		}
	}
	if d.By == byKey || d.By == byAuto {
		nid, ok, err := s.findNotification(w, r, 0, d.Q)
		if !ok {
			return
		}
		if ok, err := found(err); err != nil {
			s.failErr(w, r, "look up notification by idempotency key", err)
			return
		} else if ok {
			redirect(w, r, "/ui/n/"+strconv.FormatInt(nid, 10))
			return
		}
	}
	if d.By == byRecipient || d.By == byAuto {
		// One more than a page, to know whether an older page exists. It
		// holds its share of the bound on answers in flight until it is
		// written.
		rows, ok := s.recipientRows(w, r, d.Q, before, lookupPerPage+1)
		if !ok {
			return
		}
		d.Rows = rows
		if len(d.Rows) > lookupPerPage {
			d.Rows = d.Rows[:lookupPerPage]
			d.Next = d.Rows[len(d.Rows)-1].ID
		}
	}
	if len(d.Rows) == 0 {
		what := map[string]string{
			byAuto: "id, idempotency key or recipient", byID: "id", byKey: "idempotency key", byRecipient: "recipient",
		}[d.By]
		d.Message = fmt.Sprintf("No notification has the %s %s.", what, quote(d.Q))
		if before > 0 {
			d.Message = "No older notifications."
		}
		render(http.StatusNotFound)
		return
	}
	render(http.StatusOK)
}

// recipientRows reads a page of recipient's notifications as the look-up
// shows them: their summaries (service.Operations.NotificationSummaries,
// never cut for size: a summary's bound is small), holding the page's bound
// of the bound on answers in flight. When it cannot, it has answered and ok
// is false.
func (s *server) recipientRows(w http.ResponseWriter, r *http.Request, recipient string, before int64, limit int) (rows []service.Summary, ok bool) {
	if _, ok := s.holdPage(w, r, limit, httpguard.SummaryBytes); !ok {
		return nil, false
	}
	rows, err := s.d.Ops.NotificationSummaries(r.Context(), recipient, before, limit)
	if err != nil {
		s.failErr(w, r, "look up notifications by recipient", err)
		return nil, false
	}
	return rows, true
}

// found turns a look-up's NotFound into false.
func found(err error) (bool, error) {
	var refused *service.Error
	if errors.As(err, &refused) && refused.Kind == service.NotFound {
		return false, nil
	}
	return err == nil, err
}

type notificationData struct {
	N           wire.NotificationInfo // Waiting says what holds it back: its channel's breaker or pause
	Payload     string                // indented JSON
	Result      string                // indented JSON, "" = none
	Terminal    bool
	Replayable  bool // FAILED, on a configured channel
	Cancellable bool // PENDING or QUEUED

	// PayloadBytes and ResultBytes are the size of a payload or result cut
	// for the page (maxShownJSON); 0 = shown whole.
	PayloadBytes, ResultBytes int
}

func (s *server) notificationPage(w http.ResponseWriter, r *http.Request, sess *session) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%s is not a notification id", quote(r.PathValue("id"))))
		return
	}
	// The row, its attempt log and receipt hold their read bound
	// (httpguard.NotificationGetBytes, ~9 MiB at their largest) of the
	// bound on answers in flight until the page is rendered, then the
	// page's size until it is written.
	release, ok := s.hold(w, r, httpguard.NotificationGetBytes)
	if !ok {
		return
	}
	defer release()
	n, err := s.d.Ops.Notification(r.Context(), id)
	var refused *service.Error
	if errors.As(err, &refused) && refused.Kind == service.NotFound {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no notification %d (it may have been purged).", id))
		return
	}
	if err != nil {
		s.failErr(w, r, "get notification", err)
		return
	}
	d := notificationData{
		N: n, Payload: indentJSON(n.Payload), Result: indentJSON(n.Result),
		PayloadBytes: cutSize(n.Payload), ResultBytes: cutSize(n.Result),
		Terminal:    n.Status == wire.StatusSent || n.Status == wire.StatusFailed || n.Status == wire.StatusCancelled,
		Replayable:  n.Status == wire.StatusFailed && s.configured(n.Channel),
		Cancellable: n.Status == wire.StatusPending || n.Status == wire.StatusQueued,
	}
	v := view{Title: fmt.Sprintf("Notification %d", id), Nav: "lookup", Data: d}
	if !d.Terminal {
		v.Refresh = 2 // watch it move
	}
	s.render(w, r, http.StatusOK, "notification", sess, v)
}

func (s *server) notificationReplay(w http.ResponseWriter, r *http.Request, sess *session) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
	defer cancel()
	res, err := s.d.Ops.Replay(ctx, wire.DLQSelector{IDs: []int64{id}})
	if err != nil {
		s.failErr(w, r, "replay notification", err)
		return
	}
	s.sessions.setFlash(sess, replayFlash(res, nil))
	redirect(w, r, "/ui/n/"+strconv.FormatInt(id, 10))
}

// notificationCancel cancels a PENDING or QUEUED notification in Postgres;
// if it is in a Redis queue, the claim drops it.
func (s *server) notificationCancel(w http.ResponseWriter, r *http.Request, sess *session) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	changed, err := s.d.Ops.Cancel(r.Context(), id)
	var refused *service.Error
	switch {
	case errors.As(err, &refused):
		s.sessions.setFlash(sess, &flash{Text: "Not cancelled: " + refused.Message + ".", Error: true})
	case err != nil:
		s.failErr(w, r, "cancel notification", err)
		return
	case changed:
		s.sessions.setFlash(sess, &flash{Text: "Cancelled."})
	default:
		s.sessions.setFlash(sess, &flash{Text: "Already cancelled: nothing to do."})
	}
	redirect(w, r, "/ui/n/"+strconv.FormatInt(id, 10))
}

func (s *server) pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%s is not a notification id", quote(r.PathValue("id"))))
		return 0, false
	}
	return id, true
}

// maxShownJSON is the most of a payload or a result the notification page
// shows: HTML's escapes make its text up to 5 times longer (`"` is `&#34;`),
// and indenting up to twice, so a 4 MiB result of short strings rendered a
// 34 MiB page, built for each view and each refresh. Past it the page shows
// the first maxShownJSON bytes as stored, and says where the whole is (the
// API's GET, the CLI).
const maxShownJSON = 256 << 10

// maxShownError is the most of each attempt's error the page's history
// shows (its 1,000 rows of up to 4 KiB each rendered up to 20 MiB); the
// last error is shown whole above it.
const maxShownError = 512

// cutSize is raw's size when the page cuts it (maxShownJSON), else 0.
func cutSize(raw json.RawMessage) int {
	if len(raw) > maxShownJSON {
		return len(raw)
	}
	return 0
}

// indentJSON is raw indented for the notification page, or raw as it is
// when indenting would make it more than twice as long (plus 64 KiB):
// indentation grows with the square of the nesting, and a 1 MiB payload of
// 9,000-deep chains would be about 9 GB, built in memory for one page view.
// Its size is measured first (jsonindent.Fits), in one pass that stops at
// the bound.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if len(raw) > maxShownJSON {
		return strings.ToValidUTF8(string(raw[:maxShownJSON]), "") + " …"
	}
	if !jsonindent.Fits(raw) {
		return string(raw)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", jsonindent.Indent); err != nil {
		return string(raw)
	}
	return b.String()
}

// lookupURL is the lookup page for q by mode, at page before.
func lookupURL(q, by string, before int64) string {
	v := url.Values{"q": {q}}
	if by != "" {
		v.Set("by", by)
	}
	if before > 0 {
		v.Set("before", strconv.FormatInt(before, 10))
	}
	return "/ui/lookup?" + v.Encode()
}
