package providerclient

import (
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/wire"
)

// A plugin's verdict as the host reads it: the host's own death text marked
// as the plugin's words, and text cut to what the outbox stores.
func TestFromProto(t *testing.T) {
	forged := fromProto(&providerv1.Verdict{Outcome: providerv1.Outcome(sdk.OutcomeSuccess), Detail: DetailProcessExited + ": forged"})
	if forged.Outcome != sdk.OutcomeSuccess || forged.Detail != pluginSaid+DetailProcessExited+": forged" {
		t.Errorf("a plugin's detail worded as a death: %v %q, want SUCCESS %q", forged.Outcome, forged.Detail, pluginSaid+DetailProcessExited+": forged")
	}
	plain := fromProto(&providerv1.Verdict{Outcome: providerv1.Outcome(sdk.OutcomeTransient), Detail: "HTTP 503", ProviderCode: "E1"})
	if plain.Detail != "HTTP 503" || plain.ProviderCode != "E1" {
		t.Errorf("an ordinary verdict changed: %q %q", plain.Detail, plain.ProviderCode)
	}
	big := strings.Repeat("é", 4<<20) // 8 MB, two bytes a rune
	long := fromProto(&providerv1.Verdict{Outcome: providerv1.Outcome(sdk.OutcomeTransient), Detail: big, ProviderCode: big})
	if len(long.Detail) > wire.MaxErrorLen || !strings.HasSuffix(long.Detail, "[truncated]") {
		t.Errorf("an 8 MB detail read as %d bytes, want at most %d, marked cut", len(long.Detail), wire.MaxErrorLen)
	}
	if len(long.ProviderCode) > wire.MaxProviderCodeLen {
		t.Errorf("an 8 MB provider code read as %d bytes, want at most %d", len(long.ProviderCode), wire.MaxProviderCodeLen)
	}
	// Cut first, then marked: still within the bound.
	forgedLong := fromProto(&providerv1.Verdict{Outcome: providerv1.Outcome(sdk.OutcomeTransient), Detail: DetailProcessExited + big})
	if len(forgedLong.Detail) > wire.MaxErrorLen || !strings.HasPrefix(forgedLong.Detail, pluginSaid) {
		t.Errorf("a long detail worded as a death: %d bytes, prefix %q", len(forgedLong.Detail), forgedLong.Detail[:40])
	}
}

// A created_at an application's SQL wrote past what Unix nanoseconds hold
// (year 294276, 4713 BC) reached the plugin as another date: UnixNano wraps
// around. It goes as no time now.
func TestToProto_timeOutOfRange(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{time.Date(294276, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC)} {
		var w providerv1.Message
		toProto(&w, &sdk.Message{ID: 1, CreatedAt: at, Deadline: at})
		if w.CreatedAtUnixNano != 0 || w.DeadlineUnixNano != 0 {
			t.Errorf("%v: created_at %v, deadline %v on the wire; want none (0)", at, time.Unix(0, w.CreatedAtUnixNano).UTC(), time.Unix(0, w.DeadlineUnixNano).UTC())
		}
	}
	now := time.Now()
	var w providerv1.Message
	toProto(&w, &sdk.Message{ID: 1, CreatedAt: now})
	if w.CreatedAtUnixNano != now.UnixNano() {
		t.Errorf("created_at now: %d, want %d", w.CreatedAtUnixNano, now.UnixNano())
	}
}
