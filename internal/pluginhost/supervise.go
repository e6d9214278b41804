package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/notifyd/notifyd/internal/procfs"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// Restart backoff: the first restart comes quickly (a crash is usually a
// one-off), then doubles up to the cap while the plugin keeps failing; an
// instance that stayed up for stableAfter resets it.
const (
	restartBase = 100 * time.Millisecond
	restartMax  = 10 * time.Second
	stableAfter = 30 * time.Second
)

// instance is one plugin process.
type instance struct {
	pc      *plugin.Client
	rpc     *providerclient.Client
	run     *procRunner
	started time.Time
	sending atomic.Int64 // Send calls in flight on this process
}

// gone reports whether the process has exited.
func (i *instance) gone() bool {
	select {
	case <-i.run.exited:
		return true
	default:
		return false
	}
}

// stop ends the process. Graceful asks it to exit first (go-plugin waits up
// to 2 s); otherwise it is killed at once, as a hung process deserves.
func (i *instance) stop(graceful bool) {
	if !graceful {
		i.run.kill()
	}
	i.pc.Kill()
}

// launch starts a process, checks it is who it says, and replays every
// accepted channel config, so an instance is only ever used fully set up.
func (p *Plugin) launch(ctx context.Context) (*instance, error) {
	// On the launcher thread, where every plugin is forked: no fork can then
	// inherit the copy's write descriptor and make its exec fail with "text
	// file busy" (golang/go#22315).
	var (
		exe     string
		cleanup func()
	)
	if err := p.host.launcher.do(func() (err error) {
		exe, cleanup, err = p.host.verify(p.name, p.path)
		return err
	}); err != nil {
		return nil, err
	}
	// Once the process runs, its file can go: the kernel keeps it.
	defer cleanup()
	tail := newTail(8)
	exited := make(chan struct{})
	output := newOutputBudget(exited)
	run := &procRunner{name: p.name, path: exe, launcher: p.host.launcher, logLevel: p.host.log.GetLevel().String(),
		maxMemory: p.host.cfg.MaxMemoryBytes, exited: exited, output: output}
	// go-plugin tags its own lines with plugin=<runner name> and the
	// plugin's stderr lines with the logger name <host>.<runner name>.
	cfg := providerclient.Config(p.host.log)
	cfg.GRPCDialOptions = append(cfg.GRPCDialOptions, grpc.WithContextDialer(run.dial))
	cfg.RunnerFunc = run.attach
	cfg.StartTimeout = p.host.cfg.StartTimeout
	cfg.Stderr = tail
	cfg.SyncStdout, cfg.SyncStderr = discard{output}, discard{output}
	pc := plugin.NewClient(cfg)
	rpc, err := p.dispense(pc, run)
	if err != nil {
		return nil, p.startError(err, tail)
	}
	inst := &instance{pc: pc, rpc: rpc, run: run, started: time.Now()}
	if err := p.setUpInstance(ctx, inst); err != nil {
		inst.stop(false)
		return nil, err
	}
	return inst, nil
}

// errStartTimeout is the watchdog's verdict on a start go-plugin did not
// end itself; startError words it like go-plugin's own timeout.
var errStartTimeout = errors.New("timeout while waiting for plugin to start")

// startGrace is how long past plugins.start_timeout the watchdog in dispense
// leaves go-plugin to end a start itself, with its more precise error.
const startGrace = time.Second

// dispense is go-plugin's handshake and connection, bounded as a whole by
// plugins.start_timeout: go-plugin bounds only the wait for the handshake
// line, not what follows it (the gRPC stdio stream waits for a connection
// the plugin may never serve). Past the bound the process group is killed
// and go-plugin's cleanup finishes in the background; nothing the plugin
// left behind holds the caller (docs/design.md §7).
func (p *Plugin) dispense(pc *plugin.Client, run *procRunner) (*providerclient.Client, error) {
	type result struct {
		rpc *providerclient.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		rpc, err := providerclient.Dispense(pc)
		done <- result{rpc, err}
	}()
	t := time.NewTimer(p.host.cfg.StartTimeout + startGrace)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			// The process group is killed by now; this waits for its
			// stderr to be read (into the error's tail), pipeDrain at most.
			pc.Kill()
		}
		return r.rpc, r.err
	case <-t.C:
		run.kill()
		go func() {
			<-done
			pc.Kill()
		}()
		return nil, errStartTimeout
	}
}

// setUpInstance runs Describe and replays the remembered configs, within
// plugins.start_timeout.
func (p *Plugin) setUpInstance(ctx context.Context, inst *instance) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.host.cfg.StartTimeout)
	defer cancel()
	info, err := inst.rpc.Describe(ctx)
	if err != nil {
		return fmt.Errorf("plugin %s (%s): %w", p.name, p.path, p.startTimedOut(parent, ctx, err))
	}
	p.mu.Lock()
	if p.info.Name != "" && (p.info.Name != info.Name || p.info.Version != info.Version) {
		p.log.Info("plugin changed on restart", "was", p.info.Name+" "+p.info.Version, "now", info.Name+" "+info.Version)
	}
	if info.Name != p.name && p.info.Name != info.Name {
		// Channels name a plugin by its file; a Describe name that differs is
		// usually a copied or renamed binary.
		p.log.Warn("plugin describes itself by another name; channels use the file's", "file", "notifyd-plugin-"+p.name, "describes", info.Name)
	}
	p.info = info
	replay := make(map[string][]byte, len(p.configs))
	for ch, cfg := range p.configs {
		replay[ch] = cfg
	}
	p.mu.Unlock()

	for ch, cfg := range replay {
		got, err := inst.rpc.ConfigureChannel(ctx, ch, cfg)
		var ce *ConfigError
		switch {
		case errors.As(err, &ce):
			// The same config can fail later (its provider validates
			// credentials at Configure): stop only that channel.
			p.log.Error("channel config rejected after restart", "channel", ch, "error", ce.Message)
			p.mu.Lock()
			delete(p.configs, ch)
			delete(p.batches, ch)
			p.rejected[ch] = ce
			p.mu.Unlock()
		case err != nil && answered(err):
			// The process is up and answered this channel's Configure with
			// an error rather than a refusal (a plugin not built on the SDK,
			// or an answer its gRPC layer could not send): that channel's
			// fault, as a refusal is. Failing the restart for it kept every
			// other channel of the plugin down.
			p.log.Error("channel config failed after restart", "channel", ch, "error", err)
			p.mu.Lock()
			delete(p.configs, ch)
			delete(p.batches, ch)
			p.rejected[ch] = &ConfigError{Channel: ch, Message: "the plugin answered Configure with an error: " + err.Error()}
			p.mu.Unlock()
		case err != nil:
			return fmt.Errorf("plugin %s (%s): replay config of channel %s: %w", p.name, p.path, ch, p.startTimedOut(parent, ctx, err))
		default:
			p.mu.Lock()
			p.batches[ch] = got.Batches
			p.mu.Unlock()
		}
	}
	return nil
}

// answered reports whether err is an error the plugin process answered
// with, rather than the transport's or the deadline's: the process is
// alive, and the call it answered is at fault.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.OK, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// startTimedOut says that a call at start got no answer within
// plugins.start_timeout when that bound is what ended it (ctx is parent
// bounded by it), and returns err unchanged otherwise. The plugin's side
// may see the propagated deadline first, so its DeadlineExceeded counts.
func (p *Plugin) startTimedOut(parent, ctx context.Context, err error) error {
	bound, _ := ctx.Deadline()
	if d, ok := parent.Deadline(); (ok && !d.After(bound)) || parent.Err() != nil {
		return err // the caller's own deadline or cancel
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("no answer within plugins.start_timeout (%s): %w", p.host.cfg.StartTimeout, err)
	}
	return err
}

// startError turns go-plugin's start errors into ones that name the plugin
// and its path and say what to do.
func (p *Plugin) startError(err error, tail *tail) error {
	msg := err.Error()
	first, _, _ := strings.Cut(msg, "\n")
	stderr := tail.String()
	var why string
	switch {
	case strings.Contains(stderr, "This binary is a plugin"):
		why = "wrong handshake cookie: it is a go-plugin binary, but not a notifyd.provider.v1 plugin"
	case strings.HasPrefix(msg, "Unrecognized remote plugin message: "):
		junk := strings.TrimPrefix(first, "Unrecognized remote plugin message: ")
		why = fmt.Sprintf("it wrote %q to stdout before the handshake (a plugin must keep stdout for go-plugin and log to stderr)", junk)
		if junk == "" {
			why = "it closed stdout without a handshake"
		}
	case strings.Contains(msg, "Incompatible API version"):
		why = fmt.Sprintf("it speaks no protocol version this notifyd does (v%d): %s", providerv1.Version, first)
	case strings.Contains(msg, errStartTimeout.Error()):
		why = fmt.Sprintf("no handshake within plugins.start_timeout (%s)", p.host.cfg.StartTimeout)
	case strings.Contains(msg, "plugin exited before we could connect"):
		why = "it exited before the handshake"
	default:
		why = first
	}
	if stderr != "" {
		why += "; its stderr ends: " + stderr
	}
	return fmt.Errorf("plugin %s (%s): %w: %s", p.name, p.path, ErrHandshake, why)
}

// supervise restarts the plugin whenever its process exits or stops
// answering Health, until stopSupervising.
func (p *Plugin) supervise() {
	defer close(p.stopped)
	fails := 0
	for {
		p.mu.Lock()
		inst := p.inst
		p.mu.Unlock()
		why := p.watch(inst)
		if why == nil {
			return // stopping
		}
		p.setDown(why)
		if errors.Is(why, errStuck) {
			// A live process: the calls it is answering get their
			// verdicts, not a kill (each one killed is a message the
			// provider may have taken, sent again).
			inst.drain(stuckDrain)
		}
		inst.stop(false)
		// Every Send still on the old process fails with it (TRANSIENT,
		// outcome unknown); Sends from now on wait for the restart.
		p.log.Error("plugin down; restarting", "pid", inst.run.pid, "reason", why)
		if time.Since(inst.started) >= stableAfter {
			fails = 0
		}
		for {
			delay := min(restartBase<<min(fails, 20), restartMax)
			fails++
			if !sleep(delay, p.stop) {
				return
			}
			next, err := p.launch(context.Background())
			if err != nil {
				p.setDown(err)
				p.log.Error("plugin restart failed", "attempt", fails, "next_in", min(restartBase<<min(fails, 20), restartMax), "error", err)
				continue
			}
			select {
			case <-p.stop:
				next.stop(false)
				return
			default:
			}
			p.mu.Lock()
			p.restarts++
			p.mu.Unlock()
			p.setUp(next)
			p.log.Info("plugin restarted", "pid", next.run.pid, "restarts", p.Restarts())
			break
		}
	}
}

// healthMisses is how many health checks in a row a process may miss
// before it is replaced. Not one: replacing a process kills its in-flight
// sends, whose messages are then sent again (duplicates the provider may
// have delivered already), and a live plugin starved of CPU on a busy
// machine can miss one answer; a hung one misses every answer, and is
// replaced after healthMisses intervals instead of one.
const healthMisses = 3

// watch blocks until inst needs replacing (the reason) or supervision stops
// (nil).
func (p *Plugin) watch(inst *instance) error {
	interval := p.host.cfg.HealthInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	defer p.setMisses(0)
	over, done, watched := make(chan error, 1), make(chan struct{}), make(chan struct{})
	// Waits for the watcher, which resumes a paused process before the
	// caller stops or replaces it.
	defer func() { close(done); <-watched }()
	go func() { defer close(watched); p.watchProcess(inst, over, done) }()
	misses := 0
	for {
		select {
		case <-p.stop:
			return nil
		case <-inst.run.exited:
			return inst.run.exitReason()
		case err := <-over:
			return err
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), interval)
			err := inst.rpc.Alive(ctx)
			cancel()
			switch {
			case err == nil || inst.gone():
				if misses > 0 {
					p.log.Info("plugin answers Health again", "pid", inst.run.pid, "missed", misses)
				}
				misses = 0
			case misses+1 >= healthMisses && status.Code(err) == codes.ResourceExhausted:
				return fmt.Errorf("%w, %d health checks in a row: %w", errStuck, healthMisses, err)
			case misses+1 >= healthMisses:
				return fmt.Errorf("not answering Health %d times in a row (each within %s): %w", healthMisses, interval, err)
			default:
				misses++
				p.log.Warn("plugin missed a health check", "pid", inst.run.pid, "missed", misses, "replaced_at", healthMisses, "error", err)
			}
			p.setMisses(misses)
		}
	}
}

// errStuck is the reason for replacing a process whose liveness check says
// it has sends running long past their deadlines (sdk.StuckAfter): code that
// ignores its context holds a core or memory until the process goes.
var errStuck = errors.New("sends stuck past their deadlines")

// stuckDrain is how long a stuck process is left to answer the calls in
// flight on it before it is killed; new sends wait for its successor.
const stuckDrain = 5 * time.Second

// drain waits until no Send is in flight on i, or for at most d.
func (i *instance) drain(d time.Duration) {
	for end := time.Now().Add(d); i.sending.Load() > 0 && time.Now().Before(end) && !i.gone(); {
		time.Sleep(10 * time.Millisecond)
	}
}

// memoryCheck is how often a plugin's resident memory is read against
// plugins.max_memory_bytes, and its CPU against plugins.max_cpu: a process
// allocating as fast as it can (a few GB/s) is past the bound by at most
// what it takes in this long.
const memoryCheck = 100 * time.Millisecond

// groupCheck is how often the processes a plugin started are looked for
// (groupMembers, a walk of /proc: a few milliseconds on a machine of a
// thousand processes); those found are read every memoryCheck with it. One
// started since is past the bound by at most what it takes in this long,
// and by no more than what it may map (RLIMIT_DATA, which it inherits).
const groupCheck = time.Second

// watchProcess reads inst's process and the processes it started (its
// process group, which a replacement kills) every memoryCheck. Their
// resident memory — heap, stacks and shared mappings alike (shm, memfd, a
// MAP_SHARED region, which RLIMIT_DATA does not count) — past
// plugins.max_memory_bytes is sent on over (watch then has the process
// replaced). Their CPU past plugins.max_cpu pauses the group until it is
// under again (cpuBudget): a plugin that spins (a loop in provider code, a
// thread per message) slows only itself. One read of /proc/PID/statm and one
// of /proc/PID/stat a process a check. Only the plugin's own process was
// read for memory once: a plugin whose helper or worker processes took the
// memory was never replaced; and nothing bounded its CPU (docs/reliability.md).
func (p *Plugin) watchProcess(inst *instance, over chan<- error, done <-chan struct{}) {
	tick := time.NewTicker(memoryCheck)
	defer tick.Stop()
	max := p.host.cfg.MaxMemoryBytes
	pid := inst.run.pid
	cpu := newCPUBudget(p.host.cfg.MaxCPU, time.Now())
	defer func() {
		if cpu.paused {
			_ = pauseGroup(pid, false)
		}
	}()
	var members []int
	scanned := time.Time{}
	for {
		select {
		case <-done:
			return
		case <-inst.run.exited:
			return
		case now := <-tick.C:
			if now.Sub(scanned) >= groupCheck {
				members, scanned = groupMembers(pid), now
			}
			rss := residentBytes(pid)
			for _, m := range members {
				rss += residentBytes(m) // 0 once it is gone
			}
			if rss > max {
				what := "resident memory"
				if len(members) > 0 {
					what = fmt.Sprintf("resident memory of the plugin and the %d processes it started", len(members))
				}
				over <- fmt.Errorf("%s %d MiB, over plugins.max_memory_bytes (%d MiB)", what, rss>>20, max>>20)
				return
			}
			p.budgetCPU(cpu, pid, members, now)
		}
	}
}

// budgetCPU draws what the plugin's processes used since the last check on
// its CPU budget, and pauses or resumes them by what is left.
func (p *Plugin) budgetCPU(b *cpuBudget, pid int, members []int, now time.Time) {
	pause := b.take(now, pid, members)
	if pause == b.paused {
		return
	}
	if err := pauseGroup(pid, pause); err != nil {
		if !b.refused { // once a process: the next check tries again
			p.log.Error("plugin over plugins.max_cpu: cannot pause or resume its processes", "pid", pid, "error", err)
			b.refused = true
		}
		return
	}
	b.paused = pause
	if !pause {
		return
	}
	b.pauses++
	if b.logged.IsZero() || now.Sub(b.logged) >= cpuLogEvery {
		p.log.Warn("plugin over plugins.max_cpu: its processes are paused while over",
			"pid", pid, "max_cpu", b.max, "pauses", b.pauses, "since", b.since.Format(time.RFC3339))
		b.logged, b.pauses, b.since = now, 0, now
	}
}

// cpuLogEvery is how often, at most, a plugin held to plugins.max_cpu is
// logged.
const cpuLogEvery = 30 * time.Second

// cpuBurst is how much CPU a plugin may use past plugins.max_cpu at once, in
// seconds of its bound: a start, a burst of messages.
const cpuBurst = time.Second

// cpuBudget is plugins.max_cpu as a bucket of CPU time: it fills at max CPUs
// a second, up to cpuBurst's worth, and the plugin's processes draw on it what
// they used. Below empty they are paused (SIGSTOP) until it has filled back
// past zero, so over any span a plugin uses at most max × the span, plus
// cpuBurst's worth and what it can take in one check.
type cpuBudget struct {
	max     float64
	tokens  time.Duration // CPU time the plugin may still use
	last    time.Time
	used    map[int]time.Duration // each process's CPU time when last read
	seen    map[int]time.Duration // this check's, swapped with used
	paused  bool
	refused bool // a pause or resume failed, and was logged
	pauses  int  // since the last log line
	since   time.Time
	logged  time.Time
}

func newCPUBudget(max float64, now time.Time) *cpuBudget {
	return &cpuBudget{max: max, tokens: time.Duration(max * float64(cpuBurst)), last: now, since: now,
		used: map[int]time.Duration{}, seen: map[int]time.Duration{}}
}

// take adds what the bound gave since the last check, draws what pid and
// members used, and says whether they should be paused. A process read for
// the first time has used all its CPU time as the plugin's.
func (b *cpuBudget) take(now time.Time, pid int, members []int) (pause bool) {
	limit := time.Duration(b.max * float64(cpuBurst))
	b.tokens = min(b.tokens+time.Duration(b.max*float64(now.Sub(b.last))), limit)
	b.last = now
	clear(b.seen)
	for i := -1; i < len(members); i++ {
		proc := pid
		if i >= 0 {
			proc = members[i]
		}
		t, ok := procfs.CPU(strconv.Itoa(proc))
		if !ok {
			continue
		}
		b.seen[proc] = t
		if d := t - b.used[proc]; d > 0 {
			b.tokens -= d
		}
	}
	b.used, b.seen = b.seen, b.used
	return b.tokens < 0
}

func (p *Plugin) setMisses(n int) {
	p.mu.Lock()
	p.misses = n
	p.mu.Unlock()
}

// stopSupervising refuses new work and ends the supervisor: no restarts
// from now on.
func (p *Plugin) stopSupervising() {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		<-p.stopped
		return
	}
	p.closing = true
	p.mu.Unlock()
	close(p.stop)
	<-p.stopped
}
