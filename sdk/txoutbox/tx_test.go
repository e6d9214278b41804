package txoutbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/sdk/txoutbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// noSQL is a transaction that must not be used: every refusal comes before
// any SQL, so the application's transaction is left usable.
type noSQL struct {
	pgx.Tx
	t *testing.T
}

func (tx noSQL) Query(context.Context, string, ...any) (pgx.Rows, error) {
	tx.t.Error("EnqueueTx ran SQL for a notification it should have refused")
	return nil, errors.New("no database here")
}

func enqueueNoSQL(t *testing.T, n wire.Notification) error {
	t.Helper()
	_, err := txoutbox.EnqueueTx(context.Background(), noSQL{t: t}, n)
	return err
}

// A SendAt past year 9999 was stored, and the row could never be shown
// (time.Time's JSON refuses it: the API answered 500 "encode answer" to
// every read of it); one outside Postgres' range failed the statement with
// SQLSTATE 22008, naming no field, and aborted the application's
// transaction. Both are refused before any SQL, naming send_at, as the API
// refuses them.
func TestEnqueueTx_SendAtRange(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("-05", -5*3600)), // year 10000 in UTC
		time.Date(9999, 12, 31, 12, 0, 0, 0, time.UTC),                       // year 10000 read back at +14:00
		time.Date(295000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC),
	} {
		err := enqueueNoSQL(t, wire.Notification{Channel: "orders", Recipient: "r", Payload: json.RawMessage(`{}`), SendAt: at})
		if err == nil || !strings.Contains(err.Error(), "send_at") || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("send_at %s: %v; want a refusal naming send_at", at, err)
		}
	}
	for _, at := range []time.Time{{}, time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(9999, 12, 30, 23, 59, 59, 0, time.UTC), time.Now()} {
		row := txoutbox.Row{Channel: "orders", Recipient: "r", Payload: json.RawMessage(`{}`), DueAt: at}
		if err := row.Check(); err != nil {
			t.Errorf("send_at %s: %v, want it accepted", at, err)
		}
	}
}

// A channel that is not a name was quoted back whole: a 1 MiB channel made
// a 1 MiB error, where every other field is refused by its length first
// and the doors quote unbounded text through wire.Truncate.
func TestEnqueueTx_ChannelQuotedCut(t *testing.T) {
	t.Parallel()
	err := enqueueNoSQL(t, wire.Notification{Channel: strings.Repeat("x", 1<<20) + "!", Recipient: "r", Payload: json.RawMessage(`{}`)})
	if err == nil || len(err.Error()) > 1024 || !strings.Contains(err.Error(), "1048577 bytes") {
		t.Errorf("a 1 MiB channel: %d-byte error %.200q; want the channel cut and its length named", len(err.Error()), err)
	}
}

// A payload key given twice was stored as the last one, silently, where
// the API refuses it (400 naming the key): a reader of the first and a
// reader of the last see different messages.
func TestEnqueueTx_PayloadRepeatedKey(t *testing.T) {
	t.Parallel()
	for payload, want := range map[string]string{
		`{"text":"refund approved","text":"refund denied"}`: `payload: key "text" is given twice`,
		`[{"a":1},{"b":{"k":1,"k":2}}]`:                     `payload[1].b: key "k" is given twice`,
	} {
		err := enqueueNoSQL(t, wire.Notification{Channel: "orders", Recipient: "r", Payload: json.RawMessage(payload)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("payload %s: %v; want an error containing %q", payload, err, want)
		}
	}
	// Keys that differ in case are two keys in a payload.
	if err := (txoutbox.Row{Channel: "orders", Recipient: "r", Payload: json.RawMessage(`{"a":1,"A":2}`)}).Check(); err != nil {
		t.Errorf("a payload with keys a and A: %v", err)
	}
}
