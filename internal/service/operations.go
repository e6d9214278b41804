package service

import (
	"context"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Operations is every operation a door performs — the API's route table and
// the dashboard's pages — each implemented once, by *Service, and reached
// from the composition root as *notifyd.Daemon. Its methods take and return
// sdk/wire types (with ids, names and a context); the few answers wire has no
// type for (the dashboard's overview extras, plugin health, throughput) are
// this package's. A refusal is an *Error, whose Kind the doors map to their
// own answers; any other error is a store failing.
type Operations interface {
	// Instance is this instance's id.
	Instance() string

	// Enqueue writes ns as PENDING notifications in one statement, each
	// carrying traceParent ("" = none), and answers each with its id, status
	// and, for a channel stopped on this instance, a warning.
	Enqueue(ctx context.Context, ns []wire.Notification, traceParent string) ([]wire.Enqueued, error)
	// Notification is one notification with its history, receipt and what
	// holds it back (Waiting); NotFound for an unknown id.
	Notification(ctx context.Context, id int64) (wire.NotificationInfo, error)
	// NotificationByKey is the notification of an idempotency key, without
	// history; NotFound when none has it.
	NotificationByKey(ctx context.Context, key string) (wire.NotificationInfo, error)
	// NotificationsByRecipient is a page of a recipient's notifications
	// newest first, ids below before (0: from the newest), at most limit
	// (1 to 1000) and about 16 MiB; NextBefore pages on.
	NotificationsByRecipient(ctx context.Context, recipient string, before int64, limit int) (wire.RecipientPage, error)
	// Cancel cancels a PENDING or QUEUED notification; changed is false
	// when it was cancelled already.
	Cancel(ctx context.Context, id int64) (changed bool, err error)

	// Dead is a page of dead letters (FAILED rows), oldest first.
	Dead(ctx context.Context, q wire.DLQQuery) (wire.DLQPage, error)
	// DeadSummaries is Dead reading each row's Summary only (no payload,
	// result or attempt log; the error cut): the dashboard's list, whose
	// page is then its row count times outbox.SummaryBytes at most.
	DeadSummaries(ctx context.Context, q wire.DLQQuery) ([]Summary, error)
	// NotificationSummaries is NotificationsByRecipient reading summaries
	// only: the dashboard's look-up by recipient.
	NotificationSummaries(ctx context.Context, recipient string, before int64, limit int) ([]Summary, error)
	// NotificationSummary is one notification's Summary; NotFound for an
	// unknown id. What a look-up reads to know a notification exists.
	NotificationSummary(ctx context.Context, id int64) (Summary, error)
	// NotificationSummaryByKey is the Summary of an idempotency key's
	// notification; NotFound when none has it.
	NotificationSummaryByKey(ctx context.Context, key string) (Summary, error)
	// Replay sends dead letters back to their queue with a fresh budget.
	Replay(ctx context.Context, sel wire.DLQSelector) (wire.Replayed, error)
	// Purge deletes dead letters for good.
	Purge(ctx context.Context, sel wire.DLQSelector) (wire.Purged, error)

	// Overview is every channel at a glance, with what could not be read.
	Overview(ctx context.Context, maxAge time.Duration) (Overview, error)
	// Rates is a channel's throughput over the last samples, oldest first.
	Rates(channel string) []Rate
	// Plugins is the health of the plugins of the channels running here.
	Plugins(ctx context.Context) []PluginHealth
	// Pause stops every instance sending on channel.
	Pause(ctx context.Context, channel, reason string) error
	// Resume lets a paused channel send again.
	Resume(ctx context.Context, channel string) error
	// Callback hands a provider's callback to its channel's plugin and
	// records the receipts it reads.
	Callback(ctx context.Context, channel string, req sdk.CallbackRequest) (sdk.CallbackAnswer, wire.CallbackResult, error)

	// PutSubscriber creates or replaces a subscriber and answers it as
	// stored.
	PutSubscriber(ctx context.Context, sub wire.Subscriber) (wire.Subscriber, error)
	// Subscriber reads one subscriber; NotFound when there is none.
	Subscriber(ctx context.Context, id string) (wire.Subscriber, error)
	// DeleteSubscriber deletes one; NotFound when there is none.
	DeleteSubscriber(ctx context.Context, id string) error
	// Schedules lists the configured schedules with their next fire time
	// and latest run.
	Schedules(ctx context.Context) (wire.Schedules, error)
	// RunSchedule creates or resumes a run of a schedule; the job's Outcome
	// says which (wire.RunCreated, RunResumed, RunExists).
	RunSchedule(ctx context.Context, name string, req wire.RunRequest) (wire.Job, error)
	// CreateCampaign validates a campaign and creates its job.
	CreateCampaign(ctx context.Context, c wire.Campaign) (wire.Job, error)
	// Jobs lists bulk jobs newest first.
	Jobs(ctx context.Context, q wire.JobQuery) (wire.Jobs, error)
	// Job reads one job; NotFound when there is none.
	Job(ctx context.Context, id int64) (wire.Job, error)
	// ImportSubscribers writes many subscribers as PutSubscriber does, in
	// one statement, and answers how many.
	ImportSubscribers(ctx context.Context, subs []wire.Subscriber) (int, error)
	// RunJob materialises a PENDING job here and answers it finished;
	// Conflict when another instance has it or it has finished.
	RunJob(ctx context.Context, id int64) (wire.Job, error)
	// CancelJob cancels an unfinished job and its PENDING notifications,
	// answering the job and how many it cancelled.
	CancelJob(ctx context.Context, id int64) (wire.Job, int64, error)

	// Readiness is what /readyz reports: Postgres, Redis, every running
	// channel's plugin, the pipeline's stages and stopped channels.
	Readiness(ctx context.Context) (wire.Readiness, error)
}

var _ Operations = (*Service)(nil)

// Instance is this instance's id ("" without an engine).
func (s *Service) Instance() string {
	if s.engine == nil {
		return ""
	}
	return s.engine.Instance()
}
