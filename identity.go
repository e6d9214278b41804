package notifyd

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
)

// identity is an instance's id when instance.id is not set: the same across
// restarts on one host — so a restarted instance finds its own backup lists
// and re-sends what it had in flight at once, instead of waiting for its old
// lease to lapse — and never shared by two live processes: the id is held by
// an exclusive lock on a file that the kernel releases when the process
// dies, and a second process on the host with the same id takes a fresh
// random one instead.
//
// The id is the host name and a hash of http.listen and redis.prefix (two
// instances on one host listen on different addresses).
type identity struct {
	id   string
	lock *os.File // nil when the id is random
}

func stableIdentity(cfg *config.Config) (identity, string) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return identity{id: delivery.NewInstanceID()}, "no host name: a fresh id per start"
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%s", cfg.HTTP.Listen, cfg.Redis.Prefix)
	id := fmt.Sprintf("%s-%08x", sanitizeHost(host), h.Sum32())
	ident, err := holdIdentity(id)
	if err != nil {
		return identity{id: delivery.NewInstanceID()}, err.Error() + ": a fresh id"
	}
	return ident, ""
}

// holdIdentity takes id for this process: an exclusive lock on a file named
// after it, which the kernel drops when the process dies.
func holdIdentity(id string) (identity, error) {
	path := filepath.Join(os.TempDir(), "notifyd-instance-"+id+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return identity{}, fmt.Errorf("cannot hold instance id %s (%v)", id, err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		return identity{}, fmt.Errorf("instance id %s is held by another live notifyd on this host", id)
	}
	return identity{id: id, lock: f}, nil
}

// release gives the id up (Stop; a crash releases it too).
func (i identity) release() {
	if i.lock != nil {
		_ = unlockFile(i.lock)
		_ = i.lock.Close()
	}
}

func sanitizeHost(h string) string {
	if len(h) > 40 {
		h = h[:40]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, h)
}
