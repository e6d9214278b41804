package delivery

import (
	"context"
	"errors"
	"sort"

	"github.com/notifyd/notifyd/internal/outbox"
)

// deadLetterHooks records which channels have a dead_letter_hook (so the
// outbox's triggers write their dead letters down) and starts, for each, a
// loop that tells the hook channel every dead_letter_hook.every: the dead
// letters waiting, in notifications of at most dead_letter_hook.batch each
// (outbox.TellDeadLetters). Every instance runs the loops; SKIP LOCKED
// shares the work without telling anything twice.
func (e *Engine) deadLetterHooks(ctx context.Context) {
	var hooked []string
	for name, ch := range e.cfg.Channels {
		if ch.DeadLetterHook.Channel != "" {
			hooked = append(hooked, name)
		}
	}
	sort.Strings(hooked)
	if err := e.store.SyncDeadLetterHooks(ctx, hooked); err != nil {
		// The previous list stays in force; the next start tries again.
		e.log.Error("record the channels with a dead_letter_hook; their dead letters may not be told", "error", err)
	}
	for _, name := range hooked {
		h := e.cfg.Channels[name].DeadLetterHook
		hook := outbox.DeadLetterHook{Channel: name, Hook: h.Channel, Recipient: h.Recipient, Batch: h.Batch}
		refused := &refusedAlone{}
		e.goBackground(func(ctx context.Context) {
			e.every(ctx, h.Every, func(ctx context.Context) { e.tellDeadLetters(ctx, hook, refused) })
		})
	}
}

// tellDeadLetters drains one channel's waiting dead letters into hook
// notifications. A dead letter no hook notification could be written for
// (outbox.DeadLettersTold.Untold) is logged with the reason and counted as
// unstorable: it is recorded as told, so the channel's later dead letters
// are told all the same. A dead letter whose hook notification is refused
// alone (outbox.RefusedAloneError) refusedAloneLimit times in a row is
// recorded as told the same way: tried again for good, it failed its
// channel's hook on every call while it was the only one waiting.
func (e *Engine) tellDeadLetters(ctx context.Context, h outbox.DeadLetterHook, refused *refusedAlone) {
	for ctx.Err() == nil {
		res, err := e.store.TellDeadLetters(ctx, h)
		var lone *outbox.RefusedAloneError
		if errors.As(err, &lone) && refused.refused(lone.Event) {
			e.log.Warn("dead-letter hook: the notification telling one dead letter was refused alone, again; recording it as told",
				"channel", h.Channel, "hook", h.Hook, "id", lone.ID, "times", refusedAloneLimit, "error", err)
			h.EndRefused = lone.Event
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("dead-letter hook", "channel", h.Channel, "hook", h.Hook, "error", err)
			}
			return
		}
		if res.Told > 0 || len(res.Untold) > 0 {
			refused.forget() // refusals count in a row
		}
		for _, u := range res.Untold {
			e.log.Error("dead letter could not be told: no hook notification listing it can be written; recorded as told",
				"channel", h.Channel, "hook", h.Hook, "id", u.ID, "error", u.Reason)
			e.metrics.Unstorable(h.Channel, "dead_letter_hook")
		}
		if res.Told > 0 {
			e.log.Info("dead letters told", "channel", h.Channel, "hook", h.Hook, "count", res.Told, "notifications", res.Notifications)
		}
		if !res.More {
			return
		}
	}
}
