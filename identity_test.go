package notifyd

import (
	"strings"
	"testing"

	"github.com/notifyd/notifyd/config"
)

// TestStableIdentity: without instance.id an instance keeps its id across
// restarts on the host, a second live process with the same config gets a
// fresh one, and another listen address is another id.
func TestStableIdentity(t *testing.T) {
	cfg := config.Default()
	cfg.HTTP.Listen, cfg.Redis.Prefix = "127.0.0.1:18080", "identity-test-"+t.Name()
	first, why := stableIdentity(&cfg)
	if why != "" || first.lock == nil {
		t.Fatalf("first id %q: %s; want a held stable id", first.id, why)
	}
	second, why := stableIdentity(&cfg)
	if second.id == first.id || second.lock != nil || !strings.Contains(why, "held by another live notifyd") {
		t.Errorf("a second live process got %q (%s), want a fresh id, not %q", second.id, why, first.id)
	}
	first.release() // the first stops (or dies: the kernel releases the lock)
	again, why := stableIdentity(&cfg)
	defer again.release()
	if again.id != first.id || why != "" {
		t.Errorf("after a restart the id is %q (%s), want %q again", again.id, why, first.id)
	}
	other := cfg
	other.HTTP.Listen = "127.0.0.1:18081"
	o, _ := stableIdentity(&other)
	defer o.release()
	if o.id == first.id {
		t.Errorf("an instance on another address has the same id %q", o.id)
	}
}
