package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/sdk"
)

// MaxStoppedReasonBytes bounds the reason a stopped channel is shown with
// (in /readyz, /v1/channels, the dashboard and an enqueue's warning); the
// log keeps the whole error.
const MaxStoppedReasonBytes = 300

// NotStarted is the reason of a channel the engine has not started (it
// has not been started at all; a channel whose start failed has its error).
const NotStarted = "not started on this instance"

// Channels is the engine's view of every configured channel on this
// instance, sorted by name, with a stopped channel's Error made fit to
// show: one line of at most MaxStoppedReasonBytes, without the string values
// of the channel's config or URL credentials (a plugin may quote its config
// in its Configure error, and /readyz shows the reason to anyone), and
// NotStarted when the engine gave none. Every door shows a stopped channel
// from here, so they all say the same.
func (s *Service) Channels(ctx context.Context) ([]delivery.ChannelState, error) {
	if err := s.needEngine(); err != nil {
		return nil, err
	}
	states := s.engine.Channels(ctx)
	for i, st := range states {
		if !st.Running {
			states[i].Error = s.stoppedReason(st)
		}
	}
	return states, nil
}

// StoppedWarnings are what an enqueue to channels answers for each of them
// that is stopped on this instance, by channel: the notification is kept and
// sent once an instance runs the channel. None when every one runs, or when
// the service has no engine to ask.
func (s *Service) StoppedWarnings(ctx context.Context, channels ...string) map[string]string {
	if s.engine == nil || len(channels) == 0 {
		return nil
	}
	var out map[string]string
	for _, st := range s.engine.Channels(ctx) {
		if st.Running || !slices.Contains(channels, st.Name) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[st.Name] = fmt.Sprintf("channel %s is stopped on this instance: %s; the notification is kept and sent once the channel runs",
			st.Name, s.stoppedReason(st))
	}
	return out
}

func (s *Service) stoppedReason(st delivery.ChannelState) string {
	if st.Error == "" {
		return NotStarted
	}
	var secrets []string
	if cc, ok := s.cfg.Channels[st.Name]; ok {
		secrets = configStrings(cc.Config, secrets)
	}
	var r sdk.Redactor
	text := r.Redact(sdk.RedactURLs(st.Error), secrets...)
	return sdk.CutText(strings.Join(strings.Fields(text), " "), MaxStoppedReasonBytes)
}

// configStrings appends every string value of a channel's config (nested
// maps and lists included) long enough to be a secret.
func configStrings(v any, out []string) []string {
	switch v := v.(type) {
	case string:
		if len(v) >= sdk.MinSecretLen {
			out = append(out, v)
		}
	case map[string]any:
		for _, x := range v {
			out = configStrings(x, out)
		}
	case []any:
		for _, x := range v {
			out = configStrings(x, out)
		}
	}
	return out
}
