// Package sdk is what a provider plugin author imports. Implement Provider
// (and the Sender it returns per channel) in plain Go, then make
// sdk.Serve(provider) the whole of main. The host speaks gRPC to the plugin
// process through hashicorp/go-plugin; none of that is visible here.
//
//	func main() { sdk.Serve(&myProvider{}) }
//
// A Sender returns a Verdict per message: Success, Transient (worth retrying:
// 5xx, 429, timeouts) or Permanent (final: most 4xx, 501, 505, a TLS
// certificate the client rejects). ClassifyHTTP turns an HTTP response into
// the right one. A Redactor keeps the channel's credentials out of details
// and logs.
//
// For a plain HTTP provider, HTTPSender (one request per message) and
// HTTPBatchSender (many per request, answers matched by key) are the whole
// Sender: the plugin only builds the request.
package sdk

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Provider is a plugin: it says who it is and builds a Sender for each
// channel that uses it (one plugin process serves every such channel).
type Provider interface {
	// Describe is called first, before any Configure.
	Describe() Info
	// Configure validates one channel's config and returns its Sender. An
	// error here stops only that channel, and its message is shown to the
	// operator as written: say which key is wrong and why.
	Configure(ctx context.Context, req ConfigureRequest) (Sender, error)
}

// Sender delivers messages for one configured channel.
type Sender interface {
	// Send delivers one message. ctx carries the message's deadline. Send must
	// be safe for concurrent use: the SDK calls it from up to
	// Info.MaxConcurrency goroutines.
	Send(ctx context.Context, m Message) Verdict
}

// SenderFunc adapts a function to Sender.
type SenderFunc func(ctx context.Context, m Message) Verdict

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, m Message) Verdict { return f(ctx, m) }

// BatchSender is optional: a Sender whose provider takes many recipients in
// one request (AlimTalk partners take 100–1,000, Kakao friends 5) implements
// it, and the SDK calls SendBatch with all of a host batch's messages for the
// channel (up to the channel's batch_size) instead of calling Send for each.
//
// SendBatch must return exactly one Verdict per message: vs[i] is the verdict
// of ms[i]. Match the provider's per-recipient results to messages by a key
// the provider echoes back — send Message.ID (or IdempotencyKey) with each
// recipient and look each answer up by it — never by position: a provider
// that answers in another order, or leaves one out, otherwise credits one
// recipient with another's result (a refused message marked SENT, an
// accepted one sent again). A message with no result in the answer is
// TRANSIENT. A recipient the provider refused gets its own PERMANENT or
// TRANSIENT verdict while the others succeed, and a request-level failure (a
// 5xx, a timeout, a refused signature, an answer that cannot be read) is the
// verdict of every message that request carried.
//
// SendBatch must be safe for concurrent use, like Send: the SDK makes one
// SendBatch call per host call and channel, each on its own goroutine, and
// the host makes several calls for one channel at once (a channel has
// several fetchers when its concurrency exceeds its batch_size or it has
// partitions, a suspect message goes alone next to a batch, and a batch over
// half the protocol's message bound is split into calls sent together).
// The messages of one call are distinct notifications.
//
// Group and split as the provider needs (by template, by its maximum
// request size) and run the requests concurrently if it allows; ctx carries
// the latest of the messages' deadlines, and a message whose own deadline
// passes first is settled TRANSIENT by the SDK whatever SendBatch later says
// for it. A wrong number of verdicts, or a panic, makes every message of the
// call TRANSIENT. Send is still used by `notifyd plugins check` and tests,
// so keep it working (one message: a batch of one). sdktest.FakeBatchAPI is
// a fake batch provider that answers in shuffled order, for its tests.
type BatchSender interface {
	SendBatch(ctx context.Context, ms []Message) []Verdict
}

// A Sender may also implement io.Closer to stop background work of its own
// (a token refresher, a poller): the SDK calls Close when the channel is
// configured again (after the new Sender is in place) or its config is
// rejected. Sends of the old Sender may still be running then; Close must let
// them finish.

// HealthChecker is optional: a Sender that can tell whether its provider is
// reachable. Without it the plugin is healthy while its process answers.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// Info describes a provider.
type Info struct {
	Name         string
	Version      string
	Capabilities []string
	// ConfigSchema is a JSON Schema of the channel config, for documentation
	// and `notifyd plugins check`.
	ConfigSchema json.RawMessage
	// MaxConcurrency bounds how many Send calls run at once in this process
	// for one batch; 0 means DefaultMaxConcurrency.
	MaxConcurrency int
}

// DefaultMaxConcurrency is the fan-out limit when Info.MaxConcurrency is 0.
const DefaultMaxConcurrency = 64

// ConfigureRequest is one channel's configuration.
type ConfigureRequest struct {
	Channel string
	// Config is the channel's `config:` block as JSON.
	Config json.RawMessage
	// Logger writes to the host's log, tagged with the plugin's name. Never
	// log secrets. Serve always sets it; a request built by hand (a plugin's
	// own unit test) may leave it nil: call Log(), which never is.
	Logger hclog.Logger
}

// Log is the request's Logger, or one that discards everything when it is
// nil — so a plugin's Configure can log without checking.
func (r ConfigureRequest) Log() hclog.Logger {
	if r.Logger == nil {
		return hclog.NewNullLogger()
	}
	return r.Logger
}

// Message is one notification to deliver.
type Message struct {
	// ID is the notification's id: the same on every attempt, and distinct
	// among the messages of one Send or SendBatch call. It is the key to
	// match a provider's per-recipient answers to messages by (see
	// BatchSender) and, sent to a provider that deduplicates, a key for its
	// idempotency.
	ID        int64
	Channel   string
	Recipient string
	Payload   json.RawMessage
	// Attempt counts from 1.
	Attempt int
	// IdempotencyKey is the same on every attempt: a provider that honours
	// one can drop the duplicate that at-least-once delivery may produce.
	// It is the key the application gave when it enqueued the notification,
	// or "notifyd-<ID>" when it gave none.
	IdempotencyKey string
	CreatedAt      time.Time
	// Deadline is also ctx's deadline.
	Deadline time.Time
	// TraceParent is the W3C traceparent of this delivery attempt, "" when
	// the notification is not traced (docs/design.md §11). Send's ctx
	// already carries it as the parent span context, so a plugin's own spans
	// and an HTTP client's propagation join the trace with nothing read
	// here; a BatchSender, whose ctx is the batch's, reads it per message
	// (when the plugin exports spans, it names the SDK's span of this
	// message around the SendBatch call).
	TraceParent string
}

// Outcome is what happened to one message.
type Outcome int

// Outcomes.
const (
	OutcomeSuccess   Outcome = 1
	OutcomeTransient Outcome = 2
	OutcomePermanent Outcome = 3
)

// String names the Outcome as logs and errors print it.
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "SUCCESS"
	case OutcomeTransient:
		return "TRANSIENT"
	case OutcomePermanent:
		return "PERMANENT"
	}
	return "UNKNOWN"
}

// Verdict is a Sender's answer for one message.
type Verdict struct {
	Outcome Outcome
	// RetryAfter is the provider's hint (Retry-After, a quota reset); it can
	// raise notifyd's backoff, never lower it. RetryAfter (the function)
	// caps a header's hint at MaxRetryAfter.
	RetryAfter time.Duration
	// ProviderStatus is the provider's HTTP status, 0 when none.
	ProviderStatus int
	// ProviderCode is the provider's own error code ("-401"), if any.
	ProviderCode string
	// Detail says why, for the operator; never a secret.
	Detail string
	// Result is JSON kept with the notification: a provider message id,
	// embeddings, …
	Result json.RawMessage
}

// Success is a delivered message, with an optional result (JSON, or nil).
func Success(result json.RawMessage) Verdict {
	return Verdict{Outcome: OutcomeSuccess, Result: result}
}

// Transient is a failure worth retrying.
func Transient(detail string) Verdict { return Verdict{Outcome: OutcomeTransient, Detail: detail} }

// Permanent is a final failure: the message is dead-lettered with detail.
func Permanent(detail string) Verdict { return Verdict{Outcome: OutcomePermanent, Detail: detail} }

// WithRetryAfter sets the provider's retry hint.
func (v Verdict) WithRetryAfter(d time.Duration) Verdict { v.RetryAfter = d; return v }

// WithStatus sets the provider's HTTP status.
func (v Verdict) WithStatus(status int) Verdict { v.ProviderStatus = status; return v }

// WithCode sets the provider's own error code.
func (v Verdict) WithCode(code string) Verdict { v.ProviderCode = code; return v }

// WithResult sets the result JSON.
func (v Verdict) WithResult(result json.RawMessage) Verdict { v.Result = result; return v }
