package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// The types below are the HTTP API's JSON, request and response; the server
// (internal/api) encodes exactly these and the client (sdk/client) decodes them,
// so the two cannot drift apart. docs/openapi.yaml describes the same shapes.

// Statuses of a notification (docs/design.md §2). SENT, FAILED and CANCELLED are
// terminal.
const (
	StatusPending    = "PENDING"
	StatusQueued     = "QUEUED"
	StatusProcessing = "PROCESSING"
	StatusSent       = "SENT"
	StatusFailed     = "FAILED"
	StatusCancelled  = "CANCELLED"
)

// MaxBatch is the most notifications one enqueue call takes.
const MaxBatch = 1000

// Notification is one notification to enqueue.
type Notification struct {
	Channel   string `json:"channel"`
	Recipient string `json:"recipient"`
	// Payload is the channel's message as JSON (what its plugin expects).
	Payload json.RawMessage `json:"payload"`
	// IdempotencyKey, when set, makes a repeat of the same key return the
	// original notification instead of creating another.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// SendAt delays the send until then; zero sends now.
	SendAt time.Time `json:"send_at,omitzero"`
}

// Enqueued is the answer for one enqueued notification.
type Enqueued struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
	// Duplicate: the idempotency key was taken already; ID and Status are
	// the original's.
	Duplicate bool `json:"duplicate,omitempty"`
	// Warning, when set, says the notification's channel is stopped on the
	// instance that answered (its plugin could not start) and why: the
	// notification is kept and sent once an instance runs the channel.
	Warning string `json:"warning,omitempty"`
}

// EnqueueBatchRequest is the body of a batch enqueue.
type EnqueueBatchRequest struct {
	Notifications []Notification `json:"notifications"`
}

// EnqueuedBatch answers a batch enqueue, in request order.
type EnqueuedBatch struct {
	Notifications []Enqueued `json:"notifications"`
}

// NotificationInfo is a notification as stored, with its attempt history
// when read one by one.
type NotificationInfo struct {
	ID             int64           `json:"id"`
	Channel        string          `json:"channel"`
	Recipient      string          `json:"recipient"`
	Payload        json.RawMessage `json:"payload"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Status         string          `json:"status"`
	// Attempts counts the sends tried so far (reset by a DLQ replay).
	Attempts      int             `json:"attempts"`
	DueAt         time.Time       `json:"due_at"`
	NextAttemptAt time.Time       `json:"next_attempt_at,omitzero"`
	LastError     string          `json:"last_error,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	JobID         int64           `json:"job_id,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	SentAt        time.Time       `json:"sent_at,omitzero"`
	// Waiting says what holds an unfinished notification back, when it is
	// its channel: "channel breaker open until …", "channel paused: …"
	// (GET /v1/notifications/{id} only).
	Waiting string `json:"waiting,omitempty"`
	// History is the attempt log, oldest first (GET /v1/notifications/{id}
	// only): its latest 1,000 attempts, HistoryCut saying older ones (every
	// DLQ replay adds attempts) were left out.
	History    []Attempt `json:"history,omitempty"`
	HistoryCut bool      `json:"history_cut,omitempty"`
	// Receipt is what the provider reported after the notification was SENT
	// (a delivery report by callback), when it did (GET
	// /v1/notifications/{id} only).
	Receipt *Receipt `json:"receipt,omitempty"`
}

// Receipt outcomes: what a provider reported of a SENT notification. A
// FAILED_AFTER_SEND notification stays SENT (notifyd's part succeeded; a
// replay would only send it to the same failure): its receipt says so.
const (
	ReceiptDelivered       = "DELIVERED"
	ReceiptFailedAfterSend = "FAILED_AFTER_SEND"
)

// Receipt is a provider's report of a SENT notification, received by
// callback (POST /v1/channels/{name}/callback). A notification has at most
// one: the first report wins.
type Receipt struct {
	Outcome string `json:"outcome"` // DELIVERED | FAILED_AFTER_SEND
	// Attempt is the attempt the report is about (the notification's
	// attempts when it came).
	Attempt      int       `json:"attempt"`
	Detail       string    `json:"detail,omitempty"`
	ProviderCode string    `json:"provider_code,omitempty"`
	ReportedAt   time.Time `json:"reported_at,omitzero"` // when the provider says it happened
	ReceivedAt   time.Time `json:"received_at"`          // when notifyd heard of it
}

// Why a callback's update was not recorded (CallbackUpdate.Reason).
const (
	ReceiptIgnoredUnknown   = "unknown"   // no such notification on the channel
	ReceiptIgnoredNotSent   = "not_sent"  // PENDING, FAILED or CANCELLED: not a SENT notification
	ReceiptIgnoredInFlight  = "in_flight" // QUEUED or PROCESSING: not SENT yet; call again (the answer is 503)
	ReceiptIgnoredDuplicate = "duplicate" // it has its receipt already: the first report wins
	ReceiptIgnoredRepeated  = "repeated"  // the same notification earlier in this callback
)

// CallbackResult answers POST /v1/channels/{name}/callback: how many of the
// updates the channel's plugin read from the callback were recorded, and
// why each other one was not.
type CallbackResult struct {
	Channel string           `json:"channel"`
	Applied int              `json:"applied"`
	Ignored int              `json:"ignored"`
	Updates []CallbackUpdate `json:"updates"`
}

// CallbackUpdate is one update of a callback and its fate.
type CallbackUpdate struct {
	ID      int64  `json:"id"`
	Outcome string `json:"outcome"` // DELIVERED | FAILED_AFTER_SEND
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`  // a ReceiptIgnored* code when not applied
	Message string `json:"message,omitempty"` // the reason in words
}

// Attempt is one settled attempt.
type Attempt struct {
	Attempt         int       `json:"attempt"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	// Outcome: SUCCESS | TRANSIENT | PERMANENT, or UNKNOWN for an attempt
	// whose outcome was lost with the instance making it (killed while it
	// sent); Error says so.
	Outcome        string `json:"outcome"`
	ProviderStatus int    `json:"provider_status,omitempty"`
	ProviderCode   string `json:"provider_code,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Cancelled answers a cancel.
type Cancelled struct {
	ID     int64  `json:"id"`
	Status string `json:"status"` // CANCELLED
}

// DLQQuery pages through the dead-letter queue.
type DLQQuery struct {
	Channel string // "" = every channel
	After   int64  // the NextAfter of the previous page; 0 for the first
	Limit   int    // 0 = the server's default (100); at most 1000
}

// DLQPage is one page of FAILED notifications, lowest id first.
type DLQPage struct {
	Notifications []NotificationInfo `json:"notifications"`
	// NextAfter is the After of the next page; 0 when this page is the last.
	NextAfter int64 `json:"next_after"`
}

// RecipientPage is one page of a recipient's notifications, newest first,
// without their histories. A page holds at most the limit asked for and,
// past its first notification, about 16 MiB of payloads and results (each
// notification reads back within 1 MiB of payload and 4 MiB of result), so
// a page may end short of the limit with more to come: page on while
// NextBefore is not 0.
type RecipientPage struct {
	Notifications []NotificationInfo `json:"notifications"`
	// NextBefore is the before of the next page; 0 when this page is the last.
	NextBefore int64 `json:"next_before"`
}

// DLQSelector names dead-lettered notifications: by ids, or every one of a
// channel. A replay takes exactly one of the two; a purge takes ids, a
// channel, or both (those ids, which must be on that channel).
type DLQSelector struct {
	IDs     []int64 `json:"ids,omitempty"`
	Channel string  `json:"channel,omitempty"`
}

// Replayed answers a DLQ replay.
type Replayed struct {
	// Replayed counts every row moved FAILED → QUEUED (attempts reset).
	Replayed int64 `json:"replayed"`
	// IDs lists the rows moved, at most 10,000 of them (the service's
	// MaxReplayedIDs: the first ones moved; a channel's replay may move
	// millions). When Replayed is larger than len(IDs), the rest were
	// replayed too but are not listed.
	IDs []int64 `json:"ids"`
	// Skipped are ids asked for and left alone, each with the reason: it
	// does not exist, is not FAILED (any more), is on another channel than
	// the one given, or is on a channel this instance does not run. A
	// repeated replay therefore answers 200, replaying nothing twice.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Warning says the rows are QUEUED in Postgres but Redis refused the
	// push; the sweeper queues them within delivery.sweep_after.
	Warning string `json:"warning,omitempty"`
}

// Skipped is an id a replay or purge left alone, and why.
type Skipped struct {
	ID     int64  `json:"id"`
	Reason string `json:"reason"`
}

// Purged answers a DLQ purge.
type Purged struct {
	Purged int64 `json:"purged"`
	// Skipped are ids asked for and left alone (not FAILED, gone, or on
	// another channel than the one given), each with the reason.
	Skipped []Skipped `json:"skipped,omitempty"`
}

// ChannelStats is one channel's queue sizes and outbox counts.
type ChannelStats struct {
	Name   string `json:"name"`
	Plugin string `json:"plugin"`
	// Configured is false for a channel that only has rows left in the
	// outbox (removed from the config).
	Configured bool `json:"configured"`
	// Running says whether this instance delivers the channel; Error says
	// why not.
	Running bool   `json:"running"`
	Error   string `json:"error,omitempty"`
	// Paused is an operator's pause (every instance), with the reason given.
	Paused      bool   `json:"paused"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Breaker is the circuit breaker: closed, open or half-open.
	Breaker    string `json:"breaker,omitempty"`
	Partitions int    `json:"partitions,omitempty"`
	// PluginRestarts counts this instance's restarts of the channel's plugin.
	PluginRestarts int `json:"plugin_restarts"`
	// Redis queue sizes.
	Ready      int64 `json:"ready"`
	Delayed    int64 `json:"delayed"`
	Processing int64 `json:"processing"`
	Dead       int64 `json:"dead"`
	Instances  int   `json:"instances"`
	// Outbox counts (see CountsAt).
	Sent   int64            `json:"sent"`
	Failed int64            `json:"failed"`
	Counts map[string]int64 `json:"counts"`
}

// Channels answers GET /v1/channels.
type Channels struct {
	Channels []ChannelStats `json:"channels"`
	// CountsAt is when the outbox counts were read; they are cached for a
	// few seconds because counting reads the whole table.
	CountsAt time.Time `json:"counts_at"`
	// OmittedChannels is how many channels that are not configured but have
	// rows (written by an application's own SQL) are not listed: beside the
	// configured ones, the first 100 by name are.
	OmittedChannels int `json:"omitted_channels,omitempty"`
}

// Subscriber is an application's user: where to reach them on each channel,
// their data for payload templates, and their topics.
type Subscriber struct {
	ExternalID string            `json:"external_id"`
	Addresses  map[string]string `json:"addresses"`
	Attributes map[string]any    `json:"attributes"`
	// Topics: on PUT, topics to add (never removes any); on GET, every topic
	// in order, up to the first 1,000 (TopicsCut says there are more).
	Topics    []string  `json:"topics"`
	TopicsCut bool      `json:"topics_cut,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Audience is who a campaign or schedule goes to. Over the API a campaign
// takes a topic only; query audiences are configured by the operator.
type Audience struct {
	Topic string `json:"topic,omitempty"`
	Query string `json:"query,omitempty"`
	Key   string `json:"key,omitempty"`
}

// Schedule is a configured schedule with its next fire time and last run.
type Schedule struct {
	Name     string    `json:"name"`
	Channel  string    `json:"channel"`
	Cron     string    `json:"cron"`
	Timezone string    `json:"timezone"`
	Lead     Duration  `json:"lead"`
	MaxLate  Duration  `json:"max_late"`
	Audience Audience  `json:"audience"`
	NextFire time.Time `json:"next_fire"`
	LastRun  *Job      `json:"last_run,omitempty"`
}

// Schedules answers GET /v1/schedules.
type Schedules struct {
	Schedules []Schedule `json:"schedules"`
}

// Campaign is an ad-hoc bulk send to a topic.
type Campaign struct {
	Channel  string         `json:"channel"`
	Audience Audience       `json:"audience"`
	Payload  map[string]any `json:"payload"`
	// ContentKey names the campaign's content (at most 200 bytes): jobs
	// naming the same content on one channel — a schedule's content_key
	// included — send each recipient once between them. "": this campaign
	// alone.
	ContentKey string `json:"content_key,omitempty"`
}

// RunRequest is the optional body of POST /v1/schedules/{name}/run.
type RunRequest struct {
	// FireTime is the fire time to run: RFC 3339, or "last" for the
	// schedule's latest fire time at or before now; "": now, a run of its
	// own. Never in the future.
	FireTime string `json:"fire_time,omitempty"`
	// Force sends a fire time that already ran (DONE) to everyone again,
	// under new idempotency keys (a re-run).
	Force bool `json:"force,omitempty"`
}

// Outcomes of a schedule run request (Job.Outcome).
const (
	RunCreated = "created" // a new run
	RunResumed = "resumed" // the fire time's FAILED, CANCELLED or SKIPPED run, PENDING again from its cursor
	RunExists  = "exists"  // the fire time's run is PENDING or RUNNING already; nothing changed
)

// Job is a bulk job (a schedule run or a campaign) and its progress.
type Job struct {
	ID       int64          `json:"id"`
	Kind     string         `json:"kind"` // schedule | campaign
	Schedule string         `json:"schedule,omitempty"`
	FireTime time.Time      `json:"fire_time,omitzero"`
	Timezone string         `json:"timezone"`
	Channel  string         `json:"channel"`
	Audience Audience       `json:"audience"`
	Payload  map[string]any `json:"payload"`
	State    string         `json:"state"` // PENDING | RUNNING | DONE | FAILED | CANCELLED | SKIPPED
	// Cursor is the key of the last audience member materialised.
	Cursor  string `json:"cursor"`
	Done    int64  `json:"done"`
	Skipped int64  `json:"skipped"`
	// Failed counts members whose notification could not be made (a payload
	// template error, a bound): each is a FAILED notification with the reason.
	Failed int64 `json:"failed"`
	// Total is the audience size, nil until the job has counted it.
	Total *int64 `json:"total"`
	// Progress is Done/Total in [0, 1], nil while Total is unknown.
	Progress   *float64  `json:"progress"`
	Owner      string    `json:"owner,omitempty"`
	Heartbeat  time.Time `json:"heartbeat_at,omitzero"`
	Error      string    `json:"error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Rerun is n for a fire time's n-th forced re-run, 0 otherwise.
	Rerun int `json:"rerun,omitempty"`
	// ContentKey is the content the job sends (see Campaign.ContentKey).
	ContentKey string `json:"content_key,omitempty"`
	// Outcome is set on the answer to a schedule run request only: created,
	// resumed or exists (RunCreated …).
	Outcome string `json:"outcome,omitempty"`
}

// Terminal reports whether the job can no longer change.
func (j *Job) Terminal() bool {
	switch j.State {
	case "DONE", "FAILED", "CANCELLED", "SKIPPED":
		return true
	}
	return false
}

// JobQuery filters a job listing; zero fields do not filter.
type JobQuery struct {
	Kind     string // schedule | campaign
	Schedule string
	State    string
	Before   int64 // jobs with id < Before (paging: the last id of a page)
	Limit    int   // 0 = 50; at most 1000
}

// Jobs answers GET /v1/jobs, newest first.
type Jobs struct {
	Jobs []Job `json:"jobs"`
}

// Readiness answers /readyz: "ok" per check, or why it failed.
type Readiness struct {
	Status string            `json:"status"` // ready | unavailable
	Checks map[string]string `json:"checks"`
	// Stopped names each configured channel that is stopped on this
	// instance ("channel:<name>": "stopped" in Checks) with its reason.
	Stopped map[string]string `json:"stopped,omitempty"`
}

// Duration is a time.Duration written as Go's duration text ("10m0s").
type Duration time.Duration

// MarshalJSON writes "1h30m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads Go's duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"10m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// ErrorBody is the body of every error answer:
// {"error": {"code": "invalid", "message": "notifications[2].channel: …"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong; Message names the field or parameter at
// fault.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes, one per HTTP status the API answers with.
const (
	CodeBadRequest       = "bad_request"        // 400: unparseable body, wrong JSON type, unknown field, bad query or path parameter
	CodeUnauthorized     = "unauthorized"       // 401: missing or wrong bearer token (or callback secret)
	CodeNotFound         = "not_found"          // 404: no such notification, subscriber, schedule, job or route
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeConflict         = "conflict"           // 409: the notification is in a state that forbids the action
	CodeBodyTooLarge     = "body_too_large"     // 413: body over http.max_body_bytes
	CodeInvalid          = "invalid"            // 422: well-formed, but a value is not acceptable
	CodeTooManyRequests  = "too_many_requests"  // 429: too many bad tokens or logins from this client
	CodeInternal         = "internal"           // 500
	CodeNotImplemented   = "not_implemented"    // 501: the channel's plugin takes no callbacks
	CodeUnavailable      = "unavailable"        // 503
)

// PauseRequest is the optional body of POST /v1/channels/{name}/pause.
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ChannelControl answers pause and resume.
type ChannelControl struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}
