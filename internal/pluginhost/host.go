// Package pluginhost finds, launches and supervises provider plugins
// (docs/design.md §7): one process per plugin in use, speaking notifyd.provider.v1
// over go-plugin. A plugin that exits or stops answering Health is restarted
// with backoff and its channels are configured again; sends caught in a
// crash come back TRANSIENT with an unknown outcome, never lost. Plugins die
// with the host: the kernel kills them when it exits (Linux), and the sdk
// makes them exit when their parent goes away.
package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// Prefix is how a plugin executable's name starts: notifyd-plugin-<name>.
const Prefix = "notifyd-plugin-"

// Errors callers branch on; each comes wrapped with the plugin's name and
// path.
var (
	ErrNotFound  = errors.New("no such plugin executable")
	ErrChecksum  = errors.New("checksum mismatch")
	ErrHandshake = errors.New("handshake failed")
	ErrClosed    = errors.New("plugin host is closed")
)

// ConfigError is a channel config the plugin rejected, in its own words.
type ConfigError = providerclient.ConfigError

// Defaults for zero config values.
const (
	DefaultStartTimeout   = config.DefaultPluginStart
	DefaultHealthInterval = config.DefaultPluginHealth
	DefaultMaxMemory      = config.DefaultPluginMaxMemory
)

// DefaultMaxCPU is plugins.max_cpu when it is 0: half the CPUs this process
// may run on, at least one. A provider's sends mostly wait on the network
// (the webhook plugin used a third of a CPU at 18,000 messages a second), so
// the bound is for a plugin that spins, which it leaves the other half to
// the host, Postgres and Redis.
func DefaultMaxCPU() float64 { return float64(max(1, runtime.NumCPU()/2)) }

// Host owns every plugin process of one notifyd instance.
type Host struct {
	cfg      config.Plugins
	log      hclog.Logger
	launcher *launcher

	mu      sync.Mutex
	closed  bool
	plugins map[string]*entry
}

// entry is a plugin being launched for the first time, or running.
type entry struct {
	ready chan struct{} // closed when p or err is set
	p     *Plugin
	err   error
}

// Found is a plugin executable in plugins.dir.
type Found struct {
	Name   string
	Path   string
	SHA256 string // hex
}

// New returns a host for the plugins in cfg.Dir. It starts nothing until
// Plugin is called.
func New(cfg config.Plugins, log hclog.Logger) *Host {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = DefaultHealthInterval
	}
	if cfg.MaxMemoryBytes <= 0 {
		cfg.MaxMemoryBytes = DefaultMaxMemory
	}
	if cfg.MaxCPU <= 0 {
		cfg.MaxCPU = DefaultMaxCPU()
	}
	return &Host{cfg: cfg, log: log, launcher: newLauncher(), plugins: map[string]*entry{}}
}

// CheckDir says plainly when plugins.dir is missing or not a directory
// (`plugins.dir "./bin/plugins" (/srv/bin/plugins): no such directory`),
// instead of each channel's plugin being reported missing in turn.
func CheckDir(dir string) error {
	shown := fmt.Sprintf("%q", dir)
	if abs, err := filepath.Abs(dir); err == nil && abs != filepath.Clean(dir) {
		shown += " (" + abs + ")" // relative: to the working directory
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("plugins.dir %s: no such directory", shown)
	case err != nil:
		return fmt.Errorf("plugins.dir %s: %w", shown, err)
	case !fi.IsDir():
		return fmt.Errorf("plugins.dir %s: not a directory", shown)
	}
	return nil
}

// Discover lists the notifyd-plugin-<name> executables in plugins.dir with
// their SHA-256, sorted by name.
func (h *Host) Discover() ([]Found, error) {
	if err := CheckDir(h.cfg.Dir); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(h.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("discover plugins in plugins.dir %s: %w", h.cfg.Dir, err)
	}
	var out []Found
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), Prefix)
		name = strings.TrimSuffix(name, ".exe")
		if !ok || !config.NameRE.MatchString(name) {
			continue
		}
		path := filepath.Join(h.cfg.Dir, e.Name())
		if err := executable(path); err != nil {
			continue // a README or a half-copied file is not a plugin
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return nil, fmt.Errorf("discover plugin %s (%s): %w", name, path, err)
		}
		out = append(out, Found{Name: name, Path: path, SHA256: sum})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Path is where the executable of plugin name must be.
func (h *Host) Path(name string) string { return filepath.Join(h.cfg.Dir, Prefix+name) }

// Plugin returns the running plugin name, launching it on first use (the
// handshake and Describe done) and supervising it from then on. Concurrent
// first calls share one launch; a failed launch is not remembered, so a
// later call tries again.
func (h *Host) Plugin(ctx context.Context, name string) (*Plugin, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, fmt.Errorf("plugin %s: %w", name, ErrClosed)
	}
	e, ok := h.plugins[name]
	if !ok {
		e = &entry{ready: make(chan struct{})}
		h.plugins[name] = e
		h.mu.Unlock()
		e.p, e.err = h.start(ctx, name)
		h.mu.Lock()
		if e.err != nil {
			delete(h.plugins, name)
		} else if h.closed {
			// Close ran while we launched and could not see this plugin.
			e.p.stopSupervising()
			e.p.kill(false)
			e.p, e.err = nil, fmt.Errorf("plugin %s: %w", name, ErrClosed)
		}
		close(e.ready)
		h.mu.Unlock()
		return e.p, e.err
	}
	h.mu.Unlock()
	select {
	case <-e.ready:
		return e.p, e.err
	case <-ctx.Done():
		return nil, fmt.Errorf("plugin %s: wait for launch: %w", name, ctx.Err())
	}
}

func (h *Host) start(ctx context.Context, name string) (*Plugin, error) {
	if !config.NameRE.MatchString(name) {
		return nil, fmt.Errorf("plugin %q: invalid name: must match %s", name, config.NameRE)
	}
	p := newPlugin(h, name, h.Path(name))
	inst, err := p.launch(ctx)
	if err != nil {
		return nil, err
	}
	p.setUp(inst)
	p.log.Info("plugin started", "path", p.path, "pid", inst.run.pid, "version", p.info.Version)
	go p.supervise()
	return p, nil
}

// verify checks that path is an executable file and, when
// plugins.checksums.<name> is set, that it has that SHA-256. It returns the
// file to execute: path itself when nothing is pinned; else a private copy of
// exactly the bytes it hashed, so that a swap of path between the check and
// the start can never run an unpinned binary. The caller removes the copy
// (cleanup) once the process has started.
func (h *Host) verify(name, path string) (exe string, cleanup func(), err error) {
	if err := executable(path); err != nil {
		return "", nil, fmt.Errorf("plugin %s (%s): %w", name, path, err)
	}
	want := strings.ToLower(h.cfg.Checksums[name])
	if want == "" {
		return path, func() {}, nil
	}
	exe, got, cleanup, err := copyHashed(path)
	if err != nil {
		return "", nil, fmt.Errorf("plugin %s (%s): %w", name, path, err)
	}
	if got != want {
		cleanup()
		return "", nil, fmt.Errorf("plugin %s (%s): %w: the file's SHA-256 is %s, plugins.checksums.%s wants %s; refusing to start it",
			name, path, ErrChecksum, got, name, want)
	}
	if afterVerify != nil {
		afterVerify(path)
	}
	return exe, cleanup, nil
}

// afterVerify, when set by a test, runs between the checksum check and the
// start: where a swap of the plugin file would once have gone unnoticed.
var afterVerify func(path string)

// copyHashed copies path into a new private directory (0700, this process's
// own) while hashing the bytes it copies, and returns the copy, their
// SHA-256 and a cleanup that removes it.
func copyHashed(path string) (exe, sum string, cleanup func(), err error) {
	src, err := os.Open(path)
	if err != nil {
		return "", "", nil, err
	}
	defer src.Close()
	dir, err := os.MkdirTemp("", "notifyd-plugin-verified-*")
	if err != nil {
		return "", "", nil, fmt.Errorf("copy for checksum: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	exe = filepath.Join(dir, filepath.Base(path))
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o500)
	if err != nil {
		cleanup()
		return "", "", nil, fmt.Errorf("copy for checksum: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(dst, h), src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return "", "", nil, fmt.Errorf("copy for checksum: %w", err)
	}
	return exe, hex.EncodeToString(h.Sum(nil)), cleanup, nil
}

func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if derr := CheckDir(filepath.Dir(path)); derr != nil {
			return fmt.Errorf("%w (looked for %s): %w", ErrNotFound, filepath.Base(path), derr)
		}
		return fmt.Errorf("%w (looked for %s in plugins.dir %s)", ErrNotFound, filepath.Base(path), filepath.Dir(path))
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("not executable (mode %s); chmod +x it", fi.Mode().Perm())
	}
	return nil
}

// Stop stops every plugin: no new sends, in-flight sends drain until ctx
// ends, then the processes are stopped (gracefully if drained, killed
// otherwise). It returns an error naming the plugins whose sends did not
// drain in time. (The host has no Start: it launches a plugin the first
// time a channel asks for it.)
func (h *Host) Stop(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	var ps []*Plugin
	for _, e := range h.plugins {
		select {
		case <-e.ready:
			if e.p != nil {
				ps = append(ps, e.p)
			}
		default: // still launching: Plugin kills it when it sees closed
		}
	}
	h.mu.Unlock()

	for _, p := range ps {
		p.stopSupervising()
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			drained := p.drain(ctx)
			if !drained {
				mu.Lock()
				errs = append(errs, fmt.Errorf("plugin %s: sends still in flight when the shutdown deadline came: %w", p.name, ctx.Err()))
				mu.Unlock()
			}
			p.kill(drained)
		}()
	}
	wg.Wait()
	h.launcher.stop()
	return errors.Join(errs...)
}

// sleep waits d or until stop is closed; false when stopped.
func sleep(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// fileSHA256 is the hex SHA-256 of the file at path (for discovery's list;
// starting a pinned plugin hashes the copy it runs, in copyHashed).
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read for checksum: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
