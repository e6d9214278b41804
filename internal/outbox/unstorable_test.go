package outbox_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/notifyd/notifyd/internal/outbox"
)

func TestIsRowError(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"22023": true, "22021": true, "23505": true, "54000": true, // data, integrity, index row too large
		"08006": false, "40001": false, "53000": false, "57P01": false, "42P01": false,
	} {
		err := fmt.Errorf("settle 3 notifications: %w", &pgconn.PgError{Code: code})
		if got := outbox.IsRowError(err); got != want {
			t.Errorf("IsRowError(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
	if !outbox.IsRowError(fmt.Errorf("settle: %w", outbox.ErrInvalid)) {
		t.Error("IsRowError(ErrInvalid) = false, want true")
	}
}

func TestStore_Finish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.insertN(t, 3)
	b.force(t, outbox.StatusProcessing, 2, time.Now(), ids[0])
	b.force(t, outbox.StatusSent, 1, time.Now(), ids[2])

	t.Run("guarded on the attempt", func(t *testing.T) {
		ok, err := b.store.Finish(b.ctx, ids[0], 1, outbox.StatusFailed, "stale")
		if err != nil || ok {
			t.Errorf("Finish with a stale attempt = %v, %v; want false, nil", ok, err)
		}
	})
	t.Run("ends the row with the reason and an attempt row", func(t *testing.T) {
		ok, err := b.store.Finish(b.ctx, ids[0], 2, outbox.StatusFailed, "cannot store \x00 this")
		if err != nil || !ok {
			t.Fatalf("Finish = %v, %v; want true", ok, err)
		}
		n, err := b.store.Get(b.ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if n.Status != outbox.StatusFailed || !strings.Contains(n.LastError, "cannot store") ||
			len(n.Attempts) != 1 || n.Attempts[0].Outcome != outbox.OutcomePermanent || n.Attempts[0].Attempt != 2 {
			t.Errorf("after Finish: %s %q %+v; want FAILED with the reason and one PERMANENT attempt 2", n.Status, n.LastError, n.Attempts)
		}
	})
	t.Run("any attempt for a row not yet claimed", func(t *testing.T) {
		ok, err := b.store.Finish(b.ctx, ids[1], 0, outbox.StatusFailed, "could not be queued")
		if err != nil || !ok || b.row(t, ids[1]).Status != outbox.StatusFailed {
			t.Errorf("Finish(PENDING, 0) = %v, %v; row %+v; want FAILED", ok, err, b.row(t, ids[1]))
		}
	})
	t.Run("never a terminal row", func(t *testing.T) {
		ok, err := b.store.Finish(b.ctx, ids[2], 0, outbox.StatusFailed, "late")
		if err != nil || ok || b.row(t, ids[2]).Status != outbox.StatusSent {
			t.Errorf("Finish(SENT) = %v, %v; want false and the row still SENT", ok, err)
		}
	})
}

// A provider's error text, code and result are stored within their bounds
// whatever their size, so one verbose provider cannot fail a settle batch.
func TestStore_SettleBoundsProviderText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.insertN(t, 2)
	b.force(t, outbox.StatusProcessing, 1, time.Now(), ids...)
	huge := json.RawMessage(`"` + strings.Repeat("r", outbox.MaxResultBytes) + `"`)
	applied, err := b.store.Settle(b.ctx, []outbox.Settlement{
		{ID: ids[0], Attempt: 1, Result: outbox.ResultFailed, Error: strings.Repeat("e", 100_000), ProviderCode: strings.Repeat("c", 10_000)},
		{ID: ids[1], Attempt: 1, Result: outbox.ResultSent, Output: huge},
	})
	if err != nil || !applied[0] || !applied[1] {
		t.Fatalf("Settle = %v, %v; want both applied", applied, err)
	}
	failed, err := b.store.Get(b.ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(failed.LastError) > outbox.MaxErrorLen || len(failed.Attempts[0].ProviderCode) > outbox.MaxProviderCodeLen {
		t.Errorf("last_error %d bytes, provider code %d bytes; want ≤ %d and ≤ %d",
			len(failed.LastError), len(failed.Attempts[0].ProviderCode), outbox.MaxErrorLen, outbox.MaxProviderCodeLen)
	}
	sent, err := b.store.Get(b.ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sent.Result), "over the 4194304-byte bound") {
		t.Errorf("result = %.200s, want the note that it was over the bound", sent.Result)
	}
}
