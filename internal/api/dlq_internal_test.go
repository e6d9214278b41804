package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/wire"
)

// A page encoded a row at a time is the page as writeJSON encodes it whole,
// byte for byte, when it is within its bound.
func TestEncodeDLQPage_AsWriteJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	for _, page := range []wire.DLQPage{
		{},
		{Notifications: []wire.NotificationInfo{}},
		{Notifications: []wire.NotificationInfo{{ID: 1, Channel: "c", Recipient: "<a&b>\x01", Payload: json.RawMessage(`{"t":"<x>"}`),
			Status: "FAILED", DueAt: at, CreatedAt: at, UpdatedAt: at, LastError: "boom \"quoted\""}}},
		{Notifications: []wire.NotificationInfo{{ID: 1, Payload: json.RawMessage(`{}`)}, {ID: 2, Payload: json.RawMessage(`[1, 2]`),
			Result: json.RawMessage(`{"r": 1}`)}}, NextAfter: 2},
	} {
		_, want := encodeJSON(200, page)
		wantBytes := bytes.Clone(want.Bytes())
		got, err := encodeDLQPage(page)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), wantBytes) {
			t.Errorf("encodeDLQPage:\n%s\nwriteJSON:\n%s", got, wantBytes)
		}
	}
}
