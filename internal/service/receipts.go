package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
	"github.com/notifyd/notifyd/sdk/wire"
)

// ErrPluginCall: the channel's plugin could not read a callback (it crashed,
// is restarting, did not answer in time or broke the protocol's bounds).
var ErrPluginCall = errors.New("the channel's plugin could not read the callback")

// Callback hands a provider's callback to channel's plugin and records the
// receipts it reads (docs/design.md §7, Receipts): each update is recorded
// on a SENT notification of the channel that has none yet, and every other
// one is answered with its reason. The caller has authenticated the
// callback for channel. The answer carries the plugin's reply, if it asked
// for one. Errors of the engine (delivery.ErrUnknownChannel,
// ErrChannelStopped, ErrCallbackUnsupported, a refused or failed plugin
// call) come back wrapped for the door to map.
func (s *Service) Callback(ctx context.Context, channel string, req sdk.CallbackRequest) (sdk.CallbackAnswer, wire.CallbackResult, error) {
	res := wire.CallbackResult{Channel: channel, Updates: []wire.CallbackUpdate{}}
	if s.engine == nil {
		return sdk.CallbackAnswer{}, res, ErrNoEngine
	}
	ans, err := s.engine.Callback(ctx, channel, req)
	var refused *providerclient.CallbackRefused
	switch {
	case errors.As(err, &refused), errors.Is(err, delivery.ErrCallbackUnsupported),
		errors.Is(err, delivery.ErrUnknownChannel), errors.Is(err, delivery.ErrChannelStopped):
		return sdk.CallbackAnswer{}, res, err
	case err != nil:
		return sdk.CallbackAnswer{}, res, fmt.Errorf("%w: %w", ErrPluginCall, err)
	}
	rs := make([]outbox.Receipt, len(ans.Updates))
	for i, u := range ans.Updates {
		rs[i] = outbox.Receipt{
			NotificationID: u.NotificationID, Outcome: u.Outcome.String(),
			Detail: u.Detail, ProviderCode: u.ProviderCode, ReportedAt: u.At,
		}
	}
	applied, err := s.store.ApplyReceipts(ctx, channel, rs)
	if err != nil {
		return ans, res, err
	}
	for i, a := range applied {
		u := wire.CallbackUpdate{ID: a.NotificationID, Outcome: rs[i].Outcome, Applied: a.Applied, Reason: a.Reason}
		if a.Applied {
			res.Applied++
		} else {
			res.Ignored++
			u.Message = receiptMessage(channel, a)
		}
		res.Updates = append(res.Updates, u)
	}
	return ans, res, nil
}

// receiptMessage says in words why a receipt was not recorded.
func receiptMessage(channel string, a outbox.ReceiptApplied) string {
	switch a.Reason {
	case outbox.ReceiptUnknown:
		// Another channel's notification reads the same: the caller is
		// authenticated for this channel alone.
		return fmt.Sprintf("no notification %d on channel %s", a.NotificationID, channel)
	case outbox.ReceiptInFlight:
		return fmt.Sprintf("notification %d is %s, not SENT yet: call again", a.NotificationID, a.Status)
	case outbox.ReceiptNotSent:
		return fmt.Sprintf("notification %d is %s: a receipt is recorded only on a SENT notification", a.NotificationID, a.Status)
	case outbox.ReceiptHasOne:
		return fmt.Sprintf("notification %d has its receipt already (%s): the first report wins", a.NotificationID, a.Existing)
	case outbox.ReceiptRepeated:
		return fmt.Sprintf("notification %d appears earlier in this callback", a.NotificationID)
	}
	return a.Reason
}
