package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// receipt is one delivery report a receiver sends back on the channel's
// callback route (README, "Delivery receipts"):
//
//	{"id": 123, "status": "delivered", "detail": "…", "code": "…", "at": "2025-03-01T10:00:00Z"}
//
// id is the envelope's id, or the webhook-id ("msg_123") the receiver saw.
type receipt struct {
	ID     json.RawMessage `json:"id"`
	Status string          `json:"status"`
	Detail string          `json:"detail"`
	Code   string          `json:"code"`
	At     string          `json:"at"`
}

// HandleCallback reads one receipt, or an array of them, from the body. notifyd
// has checked the channel's callback secret before the call.
func (s *sender) HandleCallback(_ context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	body := bytes.TrimSpace(req.Body)
	var rs []receipt
	if len(body) > 0 && body[0] == '[' {
		if err := json.Unmarshal(body, &rs); err != nil {
			return sdk.CallbackAnswer{}, fmt.Errorf("body is not an array of receipts: %v", err)
		}
	} else {
		var r receipt
		if err := json.Unmarshal(body, &r); err != nil {
			return sdk.CallbackAnswer{}, fmt.Errorf("body is not a receipt {\"id\", \"status\"} nor an array of them: %v", err)
		}
		rs = []receipt{r}
	}
	if len(rs) > sdk.MaxCallbackUpdates {
		return sdk.CallbackAnswer{}, fmt.Errorf("%d receipts in one callback; at most %d", len(rs), sdk.MaxCallbackUpdates)
	}
	ans := sdk.CallbackAnswer{Updates: make([]sdk.ReceiptUpdate, 0, len(rs))}
	for i, r := range rs {
		u, err := r.update()
		if err != nil {
			return sdk.CallbackAnswer{}, fmt.Errorf("receipt %d: %v", i, err)
		}
		ans.Updates = append(ans.Updates, u)
	}
	return ans, nil
}

func (r receipt) update() (sdk.ReceiptUpdate, error) {
	id, err := receiptID(r.ID)
	if err != nil {
		return sdk.ReceiptUpdate{}, err
	}
	u := sdk.ReceiptUpdate{NotificationID: id, Detail: r.Detail, ProviderCode: r.Code}
	switch strings.ToLower(r.Status) {
	case "delivered":
		u.Outcome = sdk.Delivered
	case "failed":
		u.Outcome = sdk.FailedAfterSend
	default:
		return sdk.ReceiptUpdate{}, fmt.Errorf("status %q is neither \"delivered\" nor \"failed\"", sdk.CutText(r.Status, 64))
	}
	if r.At != "" {
		if u.At, err = time.Parse(time.RFC3339Nano, r.At); err != nil {
			return sdk.ReceiptUpdate{}, fmt.Errorf("at %q is not an RFC 3339 time", sdk.CutText(r.At, 64))
		}
	}
	return u, nil
}

// receiptID reads 123, "123" or "msg_123".
func receiptID(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errors.New("id is missing (the envelope's id or the webhook-id)")
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("id: %v", err)
		}
		s = strings.TrimPrefix(s, "msg_")
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("id %s is not a notification id (123 or \"msg_123\")", sdk.CutText(string(raw), 64))
	}
	return id, nil
}
