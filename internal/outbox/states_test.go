package outbox_test

import (
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/outbox"
)

func TestStore_Statuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.insertN(t, 2)
	dead := b.failed(t, "other", 1)
	got, err := b.store.Statuses(b.ctx, []int64{ids[0], ids[1], dead[0], 999_999})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]outbox.State{
		ids[0]:  {Channel: "ch", Status: outbox.StatusPending},
		ids[1]:  {Channel: "ch", Status: outbox.StatusPending},
		dead[0]: {Channel: "other", Status: outbox.StatusFailed},
	}
	if len(got) != len(want) {
		t.Fatalf("Statuses = %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("Statuses[%d] = %+v, want %+v", id, got[id], w)
		}
	}
	if empty, err := b.store.Statuses(b.ctx, nil); err != nil || len(empty) != 0 {
		t.Errorf("Statuses(nil) = %v, %v; want empty, nil", empty, err)
	}
}

func TestNewNotification_Check(t *testing.T) {
	t.Parallel()
	n := notif(1)
	if err := n.Check(); err != nil {
		t.Fatalf("Check(valid) = %v", err)
	}
	n.Recipient = "a\x00b"
	err := n.Check()
	if err == nil || !strings.HasPrefix(err.Error(), "recipient ") {
		t.Errorf("Check(NUL recipient) = %v, want an error starting with the field name", err)
	}
}
