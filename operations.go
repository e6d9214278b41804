package notifyd

import (
	"context"
	"time"

	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// *Daemon is the operations facade: every operation the API, the dashboard
// and the CLI perform, in sdk/wire types, each forwarded to the one
// implementation, the daemon's service (internal/service). A daemon started
// with Options.WaitForServices answers them once Ready is closed, and before
// that an Error of kind KindUnavailable (the methods with no error, nothing).
var _ service.Operations = (*Daemon)(nil)

// notRunning is nil once the daemon's operations run: at once for Start
// without Options.WaitForServices and for Open, once Ready is closed
// otherwise (Ready's close publishes what the bring-up built).
func (d *Daemon) notRunning() error {
	select {
	case <-d.Ready():
		if d.ops != nil {
			return nil
		}
	default:
	}
	return &service.Error{Kind: service.Unavailable,
		Message: "notifyd is not running yet: it is still waiting for Postgres and Redis (Options.WaitForServices); wait for Daemon.Ready"}
}

// Instance is this instance's id.
func (d *Daemon) Instance() string {
	if d.notRunning() != nil {
		return "" // not running yet (Options.WaitForServices): nothing to report
	}
	return d.ops.Instance()
}

// Enqueue writes ns as PENDING notifications in one statement, each keeping
// traceParent ("" = none); a repeated idempotency key answers the original
// with Duplicate set, a channel stopped here with a Warning.
func (d *Daemon) Enqueue(ctx context.Context, ns []wire.Notification, traceParent string) ([]wire.Enqueued, error) {
	if err := d.notRunning(); err != nil {
		return nil, err
	}
	return d.ops.Enqueue(ctx, ns, traceParent)
}

// Notification is one notification with its attempt history, receipt and
// what holds it back; an Error of KindNotFound for an unknown id.
func (d *Daemon) Notification(ctx context.Context, id int64) (wire.NotificationInfo, error) {
	if err := d.notRunning(); err != nil {
		return wire.NotificationInfo{}, err
	}
	return d.ops.Notification(ctx, id)
}

// NotificationByKey is the notification of an idempotency key (NotFound when
// none has it).
func (d *Daemon) NotificationByKey(ctx context.Context, key string) (wire.NotificationInfo, error) {
	if err := d.notRunning(); err != nil {
		return wire.NotificationInfo{}, err
	}
	return d.ops.NotificationByKey(ctx, key)
}

// NotificationsByRecipient is a page of a recipient's notifications newest
// first, ids below before (0: from the newest): at most limit (1 to 1000)
// and, past the first, about 16 MiB of payloads and results, so a page may
// end short of limit with more to come. Page on with NextBefore while it is
// not 0.
func (d *Daemon) NotificationsByRecipient(ctx context.Context, recipient string, before int64, limit int) (wire.RecipientPage, error) {
	if err := d.notRunning(); err != nil {
		return wire.RecipientPage{}, err
	}
	return d.ops.NotificationsByRecipient(ctx, recipient, before, limit)
}

// Cancel cancels a PENDING or QUEUED notification; changed is false when it
// was cancelled already, any other state is a Conflict.
func (d *Daemon) Cancel(ctx context.Context, id int64) (changed bool, err error) {
	if err := d.notRunning(); err != nil {
		return false, err
	}
	return d.ops.Cancel(ctx, id)
}

// Dead is a page of dead letters (FAILED notifications), oldest first.
func (d *Daemon) Dead(ctx context.Context, q wire.DLQQuery) (wire.DLQPage, error) {
	if err := d.notRunning(); err != nil {
		return wire.DLQPage{}, err
	}
	return d.ops.Dead(ctx, q)
}

// DeadSummaries is Dead reading each row's summary only (the dashboard's list).
func (d *Daemon) DeadSummaries(ctx context.Context, q wire.DLQQuery) ([]service.Summary, error) {
	if err := d.notRunning(); err != nil {
		return nil, err
	}
	return d.ops.DeadSummaries(ctx, q)
}

// NotificationSummaries is NotificationsByRecipient reading summaries only.
func (d *Daemon) NotificationSummaries(ctx context.Context, recipient string, before int64, limit int) ([]service.Summary, error) {
	if err := d.notRunning(); err != nil {
		return nil, err
	}
	return d.ops.NotificationSummaries(ctx, recipient, before, limit)
}

// NotificationSummary is one notification's summary; NotFound for an unknown id.
func (d *Daemon) NotificationSummary(ctx context.Context, id int64) (service.Summary, error) {
	if err := d.notRunning(); err != nil {
		return service.Summary{}, err
	}
	return d.ops.NotificationSummary(ctx, id)
}

// NotificationSummaryByKey is the summary of an idempotency key's notification.
func (d *Daemon) NotificationSummaryByKey(ctx context.Context, key string) (service.Summary, error) {
	if err := d.notRunning(); err != nil {
		return service.Summary{}, err
	}
	return d.ops.NotificationSummaryByKey(ctx, key)
}

// Replay sends dead letters (by ids, or every one of a channel) back to
// their queue with a fresh retry budget, reporting the ids it skipped.
func (d *Daemon) Replay(ctx context.Context, sel wire.DLQSelector) (wire.Replayed, error) {
	if err := d.notRunning(); err != nil {
		return wire.Replayed{}, err
	}
	return d.ops.Replay(ctx, sel)
}

// Purge deletes dead letters (by ids, or every one of a channel) for good.
func (d *Daemon) Purge(ctx context.Context, sel wire.DLQSelector) (wire.Purged, error) {
	if err := d.notRunning(); err != nil {
		return wire.Purged{}, err
	}
	return d.ops.Purge(ctx, sel)
}

// Overview is every channel at a glance, its outbox counts at most maxAge
// old (< 0: the last sample), with what could not be read.
func (d *Daemon) Overview(ctx context.Context, maxAge time.Duration) (service.Overview, error) {
	if err := d.notRunning(); err != nil {
		return service.Overview{}, err
	}
	return d.ops.Overview(ctx, maxAge)
}

// Rates is a channel's SENT throughput over the last samples, oldest first.
func (d *Daemon) Rates(channel string) []service.Rate {
	if d.notRunning() != nil {
		return nil // not running yet (Options.WaitForServices): nothing to report
	}
	return d.ops.Rates(channel)
}

// Plugins is the health of the plugins of the channels running here.
func (d *Daemon) Plugins(ctx context.Context) []service.PluginHealth {
	if d.notRunning() != nil {
		return nil // not running yet (Options.WaitForServices): nothing to report
	}
	return d.ops.Plugins(ctx)
}

// Pause stops every instance sending on channel; reason is shown to
// operators.
func (d *Daemon) Pause(ctx context.Context, channel, reason string) error {
	if err := d.notRunning(); err != nil {
		return err
	}
	return d.ops.Pause(ctx, channel, reason)
}

// Resume lets a paused channel send again.
func (d *Daemon) Resume(ctx context.Context, channel string) error {
	if err := d.notRunning(); err != nil {
		return err
	}
	return d.ops.Resume(ctx, channel)
}

// Callback hands a provider's callback, authenticated for channel, to the
// channel's plugin and records the receipts it reads.
func (d *Daemon) Callback(ctx context.Context, channel string, req sdk.CallbackRequest) (sdk.CallbackAnswer, wire.CallbackResult, error) {
	if err := d.notRunning(); err != nil {
		return sdk.CallbackAnswer{}, wire.CallbackResult{}, err
	}
	return d.ops.Callback(ctx, channel, req)
}

// PutSubscriber creates or replaces a subscriber and answers it as stored.
func (d *Daemon) PutSubscriber(ctx context.Context, sub wire.Subscriber) (wire.Subscriber, error) {
	if err := d.notRunning(); err != nil {
		return wire.Subscriber{}, err
	}
	return d.ops.PutSubscriber(ctx, sub)
}

// Subscriber reads one subscriber (NotFound when there is none).
func (d *Daemon) Subscriber(ctx context.Context, id string) (wire.Subscriber, error) {
	if err := d.notRunning(); err != nil {
		return wire.Subscriber{}, err
	}
	return d.ops.Subscriber(ctx, id)
}

// DeleteSubscriber deletes one subscriber (NotFound when there is none).
func (d *Daemon) DeleteSubscriber(ctx context.Context, id string) error {
	if err := d.notRunning(); err != nil {
		return err
	}
	return d.ops.DeleteSubscriber(ctx, id)
}

// Schedules lists the configured schedules with their next fire time and
// latest run.
func (d *Daemon) Schedules(ctx context.Context) (wire.Schedules, error) {
	if err := d.notRunning(); err != nil {
		return wire.Schedules{}, err
	}
	return d.ops.Schedules(ctx)
}

// RunSchedule creates or resumes a run of schedule name; the job's Outcome
// says which.
func (d *Daemon) RunSchedule(ctx context.Context, name string, req wire.RunRequest) (wire.Job, error) {
	if err := d.notRunning(); err != nil {
		return wire.Job{}, err
	}
	return d.ops.RunSchedule(ctx, name, req)
}

// CreateCampaign validates a campaign and creates its job.
func (d *Daemon) CreateCampaign(ctx context.Context, c wire.Campaign) (wire.Job, error) {
	if err := d.notRunning(); err != nil {
		return wire.Job{}, err
	}
	return d.ops.CreateCampaign(ctx, c)
}

// Jobs lists bulk jobs (schedule runs and campaigns) newest first.
func (d *Daemon) Jobs(ctx context.Context, q wire.JobQuery) (wire.Jobs, error) {
	if err := d.notRunning(); err != nil {
		return wire.Jobs{}, err
	}
	return d.ops.Jobs(ctx, q)
}

// Job reads one bulk job (NotFound when there is none).
func (d *Daemon) Job(ctx context.Context, id int64) (wire.Job, error) {
	if err := d.notRunning(); err != nil {
		return wire.Job{}, err
	}
	return d.ops.Job(ctx, id)
}

// Readiness is what /readyz reports.
func (d *Daemon) Readiness(ctx context.Context) (wire.Readiness, error) {
	if err := d.notRunning(); err != nil {
		return wire.Readiness{}, err
	}
	return d.ops.Readiness(ctx)
}

// ImportSubscribers writes many subscribers as PutSubscriber does, in one
// statement, and answers how many.
func (d *Daemon) ImportSubscribers(ctx context.Context, subs []wire.Subscriber) (int, error) {
	if err := d.notRunning(); err != nil {
		return 0, err
	}
	return d.ops.ImportSubscribers(ctx, subs)
}

// RunJob materialises a PENDING job (a campaign just created) in this
// process and answers it finished; an Error of KindConflict when a serving
// instance has taken it or it has finished.
func (d *Daemon) RunJob(ctx context.Context, id int64) (wire.Job, error) {
	if err := d.notRunning(); err != nil {
		return wire.Job{}, err
	}
	return d.ops.RunJob(ctx, id)
}

// CancelJob cancels an unfinished job and its notifications still PENDING,
// answering the job and how many notifications it cancelled.
func (d *Daemon) CancelJob(ctx context.Context, id int64) (wire.Job, int64, error) {
	if err := d.notRunning(); err != nil {
		return wire.Job{}, 0, err
	}
	return d.ops.CancelJob(ctx, id)
}
