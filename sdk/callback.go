package sdk

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// CallbackHandler is optional: a Sender whose provider reports delivery
// later — a message-result webhook, an SMS gateway's delivery report, an
// email provider's events — implements it, and notifyd hands it every
// callback the provider POSTs to POST /v1/channels/{channel}/callback.
// notifyd has authenticated the request with the channel's callback secret
// before the plugin sees it (the header carrying the secret is left out); a
// plugin may still check the provider's own signature, which it finds in
// Headers.
//
// HandleCallback reads the provider's report and answers an update per
// notification it names: delivered, or failed after it was sent. It does not
// look anything up: notifyd records each update on a SENT notification of
// the channel and ignores (with the reason, in its answer to the provider)
// an update for an unknown id, another channel's, a notification not SENT or
// one that already has its receipt, so a provider retrying a callback
// changes nothing the second time. Return an error for a body that cannot
// be read: its text goes back to the caller with a 400, so keep secrets out
// of it. Without this interface the route answers 501 for the channel.
//
// HandleCallback must be safe for concurrent use, and should honour ctx
// (the host gives a callback 10 s): a handler that does not return keeps
// running after its caller has its answer, holding one of the channel's
// MaxCallbacksRunning slots until it does; while all of them are held so,
// the channel's callbacks are refused and the provider is answered 503, to
// call again. At most
// MaxCallbackUpdates updates are taken from one answer (an answer with more
// is refused whole, so split what the provider sent: it can call again), and
// each Detail and ProviderCode is cut to its bound.
type CallbackHandler interface {
	HandleCallback(ctx context.Context, req CallbackRequest) (CallbackAnswer, error)
}

// Bounds of a callback answer (docs/config.md, Bounds).
const (
	// MaxCallbackUpdates is the most updates one callback answer may carry.
	MaxCallbackUpdates = 1000
	// MaxReceiptDetail bounds an update's Detail in bytes; longer is cut on a
	// UTF-8 boundary.
	MaxReceiptDetail = 1024
	// MaxReceiptCode bounds an update's ProviderCode in bytes.
	MaxReceiptCode = 256
	// MaxReplyBody bounds CallbackAnswer.ReplyBody.
	MaxReplyBody = 4096
)

// CallbackRequest is one callback a provider made, as notifyd received it.
type CallbackRequest struct {
	Channel string
	// Headers are the request's headers (bounded by notifyd), without the
	// one that carried the channel's callback secret.
	Headers http.Header
	// Query is the request's query.
	Query url.Values
	// Body is the request body, at most the channel's
	// callback.max_body_bytes.
	Body []byte
}

// ReceiptOutcome is what the provider reported of a sent notification.
type ReceiptOutcome int

// Receipt outcomes.
const (
	// Delivered: the provider delivered it.
	Delivered ReceiptOutcome = 1
	// FailedAfterSend: the provider accepted it, then could not deliver it
	// (an unreachable handset, a bounced email). The notification stays SENT
	// — notifyd's part succeeded — and its receipt says so.
	FailedAfterSend ReceiptOutcome = 2
)

// String names the ReceiptOutcome as logs and errors print it.
func (o ReceiptOutcome) String() string {
	switch o {
	case Delivered:
		return "DELIVERED"
	case FailedAfterSend:
		return "FAILED_AFTER_SEND"
	}
	return "UNKNOWN"
}

// ReceiptUpdate is the provider's report of one notification.
type ReceiptUpdate struct {
	// NotificationID is notifyd's id of the notification (Message.ID): a
	// provider that echoes only its own message id needs the plugin to have
	// sent notifyd's id along (most take a custom reference field).
	NotificationID int64
	Outcome        ReceiptOutcome
	// Detail says what the provider said, for the operator; never a secret.
	Detail string
	// ProviderCode is the provider's own result code, if any.
	ProviderCode string
	// At is when the provider says it happened; zero when it does not say.
	At time.Time
}

// CallbackAnswer is a plugin's reading of one callback.
type CallbackAnswer struct {
	Updates []ReceiptUpdate
	// ReplyStatus, when not 0, is the HTTP status the provider gets instead
	// of notifyd's JSON summary, with ReplyBody (at most MaxReplyBody bytes)
	// and ReplyContentType: for a provider that wants a fixed answer.
	ReplyStatus      int
	ReplyBody        []byte
	ReplyContentType string
}

// DeliveredUpdate is an update saying notification id was delivered.
func DeliveredUpdate(id int64, detail string) ReceiptUpdate {
	return ReceiptUpdate{NotificationID: id, Outcome: Delivered, Detail: detail}
}

// FailedAfterSendUpdate is an update saying notification id was accepted,
// then not delivered.
func FailedAfterSendUpdate(id int64, detail string) ReceiptUpdate {
	return ReceiptUpdate{NotificationID: id, Outcome: FailedAfterSend, Detail: detail}
}

// CutText returns s cut to at most n bytes on a UTF-8 boundary, with "…"
// marking the cut (within the n bytes); s itself when it fits. Invalid UTF-8
// is replaced and NUL bytes dropped, so the result is text Postgres stores.
func CutText(s string, n int) string {
	s = wireText(s)
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if len(s) <= n {
		return s
	}
	const mark = "…"
	if n < len(mark) {
		return ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
