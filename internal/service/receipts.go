package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
	"github.com/notifyd/notifyd/sdk/wire"
)

// ErrPluginCall: the channel's plugin could not read a callback (it crashed,
// is restarting, did not answer in time or broke the protocol's bounds). It
// is the cause of the Unavailable refusal Callback answers then.
var ErrPluginCall = errors.New("the channel's plugin could not read the callback")

// CallbackTimeout bounds the plugin's reading of one callback, a plugin
// restart waited for included.
const CallbackTimeout = 10 * time.Second

// Callback hands a provider's callback to channel's plugin and records the
// receipts it reads (docs/design.md §7, Receipts): each update is recorded
// on a SENT notification of the channel that has none yet, and every other
// one is answered with its reason. The caller has authenticated the
// callback for channel. The answer carries the plugin's reply, if it asked
// for one. A body the plugin refuses is Unreadable, a plugin that takes no
// callbacks Unsupported, and a channel not running here or a plugin that
// cannot answer now (within CallbackTimeout) Unavailable: the provider may
// call again.
func (s *Service) Callback(ctx context.Context, channel string, req sdk.CallbackRequest) (sdk.CallbackAnswer, wire.CallbackResult, error) {
	res := wire.CallbackResult{Channel: channel, Updates: []wire.CallbackUpdate{}}
	if s.engine == nil {
		return sdk.CallbackAnswer{}, res, ErrNoEngine
	}
	cctx, cancel := context.WithTimeout(ctx, CallbackTimeout)
	defer cancel()
	ans, err := s.engine.Callback(cctx, channel, req)
	var refused *providerclient.CallbackRefused
	switch {
	case errors.As(err, &refused):
		return sdk.CallbackAnswer{}, res, &Error{Kind: Unreadable, Err: err,
			Message: fmt.Sprintf("channel %s: the plugin could not read the callback: %s", channel, refused.Message)}
	case errors.Is(err, delivery.ErrCallbackUnsupported):
		return sdk.CallbackAnswer{}, res, &Error{Kind: Unsupported, Err: err,
			Message: fmt.Sprintf("the plugin of channel %s takes no callbacks (its Sender is not an sdk.CallbackHandler)", channel)}
	case errors.Is(err, delivery.ErrUnknownChannel), errors.Is(err, delivery.ErrChannelStopped):
		s.log.Warn("callback refused: channel not running here", "channel", channel, "error", err)
		return sdk.CallbackAnswer{}, res, &Error{Kind: Unavailable, Err: err,
			Message: fmt.Sprintf("channel %s is not running on this instance; retry", channel)}
	case err != nil:
		// Crashed, restarting, too slow or broke the contract: the provider
		// may retry; the detail is the operator's, not the caller's.
		s.log.Warn("callback: the plugin call failed", "channel", channel, "error", err)
		msg := fmt.Sprintf("the plugin of channel %s could not read the callback now; retry", channel)
		if cctx.Err() != nil {
			msg = fmt.Sprintf("the plugin of channel %s did not answer within %s; retry", channel, CallbackTimeout)
		}
		return sdk.CallbackAnswer{}, res, &Error{Kind: Unavailable, Message: msg, Err: fmt.Errorf("%w: %w", ErrPluginCall, err)}
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
