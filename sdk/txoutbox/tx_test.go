package txoutbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
