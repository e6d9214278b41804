package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/sdk/wire"
)

// Receipt outcomes (migration 00013).
const (
	ReceiptDelivered       = wire.ReceiptDelivered
	ReceiptFailedAfterSend = wire.ReceiptFailedAfterSend
)

// Receipt is what a provider reported of a SENT notification after it was
// sent (docs/design.md §7, Receipts).
type Receipt struct {
	NotificationID int64
	Outcome        string // ReceiptDelivered | ReceiptFailedAfterSend
	Attempt        int    // the notification's attempts when it came (read back only)
	Detail         string
	ProviderCode   string
	ReportedAt     time.Time // zero: the provider did not say
	ReceivedAt     time.Time // read back only
}

// Why a receipt was not recorded.
const (
	ReceiptUnknown  = wire.ReceiptIgnoredUnknown   // no such notification on the channel
	ReceiptNotSent  = wire.ReceiptIgnoredNotSent   // PENDING, FAILED or CANCELLED
	ReceiptInFlight = wire.ReceiptIgnoredInFlight  // QUEUED or PROCESSING: not SENT yet
	ReceiptHasOne   = wire.ReceiptIgnoredDuplicate // it has its receipt already (the first report wins)
	ReceiptRepeated = wire.ReceiptIgnoredRepeated  // the same notification earlier in the same callback
)

// ReceiptApplied is the fate of one receipt given to ApplyReceipts.
type ReceiptApplied struct {
	NotificationID int64
	Applied        bool
	Reason         string // "" when applied, else a Receipt* reason
	Status         string // the notification's status, "" when unknown
	Existing       string // with ReceiptHasOne: the outcome already recorded
}

// MaxReceiptDetail bounds a receipt's detail as it is read back: what a
// callback can record (sdk.MaxReceiptDetail, which the plugin wire cuts
// to). A receipt's provider code is read back within MaxProviderCodeLen.
const MaxReceiptDetail = 1024

// ErrReceiptBatch: more receipts than one statement takes.
var ErrReceiptBatch = errors.New("too many receipts in one batch")

// MaxReceiptBatch is the most receipts ApplyReceipts takes at once (the
// SDK's bound on one callback's updates).
const MaxReceiptBatch = 1000

// ApplyReceipts records each receipt on its notification of channel, in one
// statement, and answers each one's fate in order. A receipt is recorded
// only on a SENT notification of that channel without one: another
// channel's id reads as unknown (the caller authenticated for this channel
// alone), and a second receipt for a notification, the same or not, changes
// nothing. The notification row is not written: its status stays SENT
// whatever the receipt says (docs/design.md §7).
func (s *Store) ApplyReceipts(ctx context.Context, channel string, rs []Receipt) ([]ReceiptApplied, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if len(rs) > MaxReceiptBatch {
		return nil, fmt.Errorf("apply %d receipts: %w (at most %d)", len(rs), ErrReceiptBatch, MaxReceiptBatch)
	}
	ids := make([]int64, len(rs))
	outcomes := make([]string, len(rs))
	details := make([]string, len(rs))
	codes := make([]string, len(rs))
	ats := make([]*time.Time, len(rs))
	for i, r := range rs {
		if r.Outcome != ReceiptDelivered && r.Outcome != ReceiptFailedAfterSend {
			return nil, fmt.Errorf("apply receipts: receipt %d (notification %d) has outcome %q", i, r.NotificationID, r.Outcome)
		}
		ids[i], outcomes[i], details[i], codes[i] = r.NotificationID, r.Outcome, r.Detail, r.ProviderCode
		if !r.ReportedAt.IsZero() {
			t := r.ReportedAt
			ats[i] = &t
		}
	}
	// known reads without locking (a PROCESSING row is the pipeline's);
	// sent locks the SENT rows against retention's delete while their
	// receipts go in (KEY SHARE blocks no update). The first receipt of an
	// id in the callback is the one tried; later ones are "repeated".
	rows, err := s.pool.Query(ctx, `
WITH input AS (
    SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
        WITH ORDINALITY AS u(id, outcome, detail, code, at, ord)
),
firsts AS (
    SELECT DISTINCT ON (id) * FROM input ORDER BY id, ord
),
known AS (
    SELECT id, status FROM notifications WHERE id IN (SELECT id FROM input) AND channel = $1
),
sent AS (
    SELECT id, attempts FROM notifications
     WHERE id IN (SELECT id FROM known WHERE status = 'SENT') AND status = 'SENT'
       FOR KEY SHARE
),
ins AS (
    INSERT INTO notification_receipts (notification_id, outcome, attempt, reported_at, provider_code, detail)
    SELECT f.id, f.outcome, s.attempts, f.at, nullif(f.code, ''), nullif(f.detail, '')
      FROM firsts f JOIN sent s ON s.id = f.id
    ON CONFLICT (notification_id) DO NOTHING
    RETURNING notification_id
)
SELECT i.id, coalesce(k.status, ''), (i.ord = f.ord) AS first,
       ins.notification_id IS NOT NULL AS applied, coalesce(r.outcome, '')
  FROM input i
  JOIN firsts f ON f.id = i.id
  LEFT JOIN known k ON k.id = i.id
  LEFT JOIN ins ON ins.notification_id = i.id
  LEFT JOIN notification_receipts r ON r.notification_id = i.id
 ORDER BY i.ord`, channel, ids, outcomes, details, codes, ats)
	if err != nil {
		return nil, fmt.Errorf("apply %d receipts on channel %s: %w", len(rs), channel, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReceiptApplied, error) {
		var a ReceiptApplied
		var first, applied bool
		if err := r.Scan(&a.NotificationID, &a.Status, &first, &applied, &a.Existing); err != nil {
			return a, err
		}
		switch {
		case !first:
			a.Reason = ReceiptRepeated
		case applied:
			a.Applied, a.Existing = true, ""
		case a.Status == "":
			a.Reason = ReceiptUnknown
		case a.Status == StatusQueued || a.Status == StatusProcessing:
			a.Reason = ReceiptInFlight
		case a.Status != StatusSent:
			a.Reason = ReceiptNotSent
		default:
			a.Reason = ReceiptHasOne
		}
		return a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("apply %d receipts on channel %s: %w", len(rs), channel, err)
	}
	return out, nil
}

// receipt reads notification id's receipt; nil when it has none.
func (s *Store) receipt(ctx context.Context, id int64) (*Receipt, error) {
	r := Receipt{NotificationID: id}
	var reported *time.Time
	// The text is read back within its bounds: no CHECK holds it (an
	// application's SQL may write any length), and left() has Postgres
	// detoast and send only the characters asked for, one more than the
	// bound so that a longer text is cut and marked below.
	err := s.pool.QueryRow(ctx, `
SELECT outcome, attempt, `+readTime("reported_at")+`, `+readTime("received_at")+`,
       left(coalesce(provider_code, ''), `+strconv.Itoa(MaxProviderCodeLen+1)+`),
       left(coalesce(detail, ''), `+strconv.Itoa(MaxReceiptDetail+1)+`)
  FROM notification_receipts WHERE notification_id = $1`, id).
		Scan(&r.Outcome, &r.Attempt, &reported, &r.ReceivedAt, &r.ProviderCode, &r.Detail)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	r.ProviderCode, r.Detail = wire.Truncate(r.ProviderCode, MaxProviderCodeLen), wire.Truncate(r.Detail, MaxReceiptDetail)
	if reported != nil {
		r.ReportedAt = *reported
	}
	return &r, nil
}
