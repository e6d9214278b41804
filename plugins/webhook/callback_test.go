package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// TestSender_HandleCallback: a receipt or an array of them becomes updates,
// by envelope id or webhook-id; anything else is refused naming the field.
func TestSender_HandleCallback(t *testing.T) {
	t.Parallel()
	h, ok := configure(t, &provider{}, map[string]any{"url": "http://127.0.0.1:9/"}).(sdk.CallbackHandler)
	if !ok {
		t.Fatal("the webhook sender is not an sdk.CallbackHandler")
	}
	ctx := context.Background()
	ans, err := h.HandleCallback(ctx, sdk.CallbackRequest{Body: []byte(
		`[{"id":7,"status":"delivered","detail":"ok","code":"R","at":"2025-03-01T10:00:00Z"},{"id":"msg_8","status":"FAILED"},{"id":"9","status":"delivered"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	want := []sdk.ReceiptUpdate{
		{NotificationID: 7, Outcome: sdk.Delivered, Detail: "ok", ProviderCode: "R", At: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)},
		{NotificationID: 8, Outcome: sdk.FailedAfterSend},
		{NotificationID: 9, Outcome: sdk.Delivered},
	}
	if len(ans.Updates) != len(want) {
		t.Fatalf("updates %+v; want %+v", ans.Updates, want)
	}
	for i, u := range ans.Updates {
		if u.NotificationID != want[i].NotificationID || u.Outcome != want[i].Outcome || u.Detail != want[i].Detail ||
			u.ProviderCode != want[i].ProviderCode || !u.At.Equal(want[i].At) {
			t.Errorf("update %d = %+v; want %+v", i, u, want[i])
		}
	}
	for body, wantErr := range map[string]string{
		`{"status":"delivered"}`:                 "id is missing",
		`{"id":"abc","status":"delivered"}`:      "not a notification id",
		`{"id":-3,"status":"delivered"}`:         "not a notification id",
		`{"id":1,"status":"opened"}`:             `"opened"`,
		`{"id":1,"status":"failed","at":"soon"}`: "RFC 3339",
		`not json`:                               "not a receipt",
		`[1,2]`:                                  "not an array of receipts",
	} {
		if _, err := h.HandleCallback(ctx, sdk.CallbackRequest{Body: []byte(body)}); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v; want one saying %s", body, err, wantErr)
		}
	}
	many := "[" + strings.Repeat(`{"id":1,"status":"delivered"},`, sdk.MaxCallbackUpdates) + `{"id":1,"status":"delivered"}]`
	if _, err := h.HandleCallback(ctx, sdk.CallbackRequest{Body: []byte(many)}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d receipts: error %v; want the bound", sdk.MaxCallbackUpdates+1, err)
	}
}
