package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// Details of the TRANSIENT verdicts the host makes itself. "outcome unknown"
// means the plugin may have delivered the message: the retry may duplicate
// it, and the idempotency key is there for that.
const (
	DetailExited       = providerclient.DetailProcessExited
	DetailNoAnswer     = "plugin did not answer before the deadline, outcome unknown"
	DetailCallFailed   = "plugin call failed, outcome unknown"
	DetailUnavailable  = "plugin unavailable, not sent"
	DetailShuttingDown = "plugin host shutting down, not sent"
)

// sendGrace is how long past the latest message deadline the host waits for
// a batch's answer: the sdk settles every message by its deadline, so this
// only covers the trip back.
const sendGrace = time.Second

// Plugin is one supervised plugin process (and its successors after
// restarts). All methods are safe for concurrent use.
type Plugin struct {
	host *Host
	name string
	path string
	log  hclog.Logger

	mu       sync.Mutex
	inst     *instance     // nil while down
	up       chan struct{} // closed while inst is set
	downErr  error         // why it is down
	info     sdk.Info
	configs  map[string]json.RawMessage // accepted, replayed after a restart
	batches  map[string]bool            // accepted channels whose Sender takes a batch in one call
	rejected map[string]error           // channel → the plugin's rejection
	restarts int
	misses   int // health checks missed in a row by the current process
	closing  bool
	inflight sync.WaitGroup

	stop    chan struct{} // closed to stop supervising
	stopped chan struct{} // closed when the supervisor returned
}

func newPlugin(h *Host, name, path string) *Plugin {
	return &Plugin{
		host:     h,
		name:     name,
		path:     path,
		log:      h.log.With("plugin", name),
		up:       make(chan struct{}),
		configs:  map[string]json.RawMessage{},
		batches:  map[string]bool{},
		rejected: map[string]error{},
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
}

// Name is the plugin's name (notifyd-plugin-<name>).
func (p *Plugin) Name() string { return p.name }

// Path is the plugin's executable.
func (p *Plugin) Path() string { return p.path }

// Info is what the plugin said about itself at its latest start.
func (p *Plugin) Info() sdk.Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// Restarts counts the times the supervisor brought the plugin back.
func (p *Plugin) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// HealthMisses is how many health checks in a row the current process has
// missed (0 once it answers again); at healthMisses it is replaced.
func (p *Plugin) HealthMisses() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.misses
}

// PID is the current process id, 0 while the plugin is down.
func (p *Plugin) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inst == nil {
		return 0
	}
	return p.inst.run.pid
}

// Configure configures channel with cfg (the channel's config as JSON). An
// accepted config is remembered and replayed after every restart. A rejected
// one is a *ConfigError carrying the plugin's own message; it stops only that
// channel (its messages come back TRANSIENT until a config is accepted).
// Configuring is part of a channel's start: the plugin answers within
// plugins.start_timeout, as it does the replays after a restart.
func (p *Plugin) Configure(ctx context.Context, channel string, cfg json.RawMessage) error {
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	inst, err := p.await(ctx)
	if err != nil {
		return fmt.Errorf("plugin %s: configure channel %s: %w", p.name, channel, err)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.host.cfg.StartTimeout)
	defer cancel()
	got, err := inst.rpc.ConfigureChannel(ctx, channel, cfg)
	var ce *ConfigError
	switch {
	case errors.As(err, &ce):
		p.mu.Lock()
		delete(p.configs, channel)
		delete(p.batches, channel)
		p.rejected[channel] = ce
		p.mu.Unlock()
		return fmt.Errorf("plugin %s: %w", p.name, ce)
	case err != nil:
		return fmt.Errorf("plugin %s: %w", p.name, p.startTimedOut(parent, ctx, err))
	}
	p.mu.Lock()
	p.configs[channel] = cfg
	p.batches[channel] = got.Batches
	delete(p.rejected, channel)
	p.mu.Unlock()
	return nil
}

// Batches reports whether the plugin said, when it last accepted channel's
// config, that the channel's Sender takes a batch in one call
// (sdk.BatchSender): one Send is then one provider call, however many
// messages it carries.
func (p *Plugin) Batches(channel string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batches[channel]
}

// Send delivers ms and always returns exactly len(ms) verdicts. A crash, a
// gRPC error or a missed deadline makes every message of the batch TRANSIENT
// with an unknown outcome; a plugin that is down (restarting) makes them
// TRANSIENT without sending.
func (p *Plugin) Send(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	if len(ms) == 0 {
		return nil
	}
	var vs []sdk.Verdict
	p.send(ctx, ms, func(ctx context.Context, inst *instance) error {
		var err error
		vs, err = inst.rpc.Send(ctx, ms)
		return err
	}, func(host []sdk.Verdict) { vs = host })
	return vs
}

// SendEach is Send handing each verdict to got as the plugin answers it
// (idx: indexes into ms; got is called on the caller's goroutine), every
// message exactly once by the time it returns: a message its provider holds
// until its deadline holds back neither the others' verdicts nor what the
// caller keeps for them. A failed call, or a plugin that breaks the contract
// part-way, leaves the messages not yet answered TRANSIENT with an unknown
// outcome, as Send does.
func (p *Plugin) SendEach(ctx context.Context, ms []sdk.Message, got func(idx []int, vs []sdk.Verdict)) {
	if len(ms) == 0 {
		return
	}
	answered := make([]bool, len(ms))
	p.send(ctx, ms, func(ctx context.Context, inst *instance) error {
		return inst.rpc.SendEach(ctx, ms, func(idx []int, vs []sdk.Verdict) {
			for _, i := range idx {
				answered[i] = true
			}
			got(idx, vs)
		})
	}, func(host []sdk.Verdict) {
		var idx []int
		var vs []sdk.Verdict
		for i, done := range answered {
			if !done {
				idx, vs = append(idx, i), append(vs, host[i])
			}
		}
		if len(idx) > 0 {
			got(idx, vs)
		}
	})
}

// send is Send's and SendEach's: call is the plugin call, made on the
// running instance; host is given len(ms) verdicts the host made itself
// when the call was not made or failed.
func (p *Plugin) send(ctx context.Context, ms []sdk.Message, call func(context.Context, *instance) error, host func([]sdk.Verdict)) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		host(all(len(ms), DetailShuttingDown))
		return
	}
	p.inflight.Add(1)
	p.mu.Unlock()
	defer p.inflight.Done()

	ctx, cancel := sendContext(ctx, ms)
	defer cancel()
	inst, err := p.await(ctx)
	if err != nil {
		host(all(len(ms), fmt.Sprintf("%s: %v", DetailUnavailable, err)))
		return
	}
	if vs := p.unconfigured(ms); vs != nil {
		host(vs)
		return
	}
	inst.sending.Add(1)
	err = call(ctx, inst)
	inst.sending.Add(-1)
	if err == nil {
		return
	}
	if status.Code(err) == codes.Unavailable {
		// The connection broke: give the exit a moment to be seen, so the
		// verdict says what happened and the next Send waits for the restart.
		select {
		case <-inst.run.exited:
		case <-time.After(time.Second):
		}
	}
	detail := DetailCallFailed
	switch {
	case inst.gone():
		detail = DetailExited
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		detail = DetailNoAnswer
	}
	p.log.Warn("send failed", "messages", len(ms), "error", err)
	host(all(len(ms), fmt.Sprintf("%s: %v", detail, err)))
}

// sendContext bounds a batch by its latest message deadline plus the trip
// back; a message without a deadline leaves only ctx's.
func sendContext(ctx context.Context, ms []sdk.Message) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, m := range ms {
		if m.Deadline.IsZero() {
			return context.WithCancel(ctx)
		}
		if m.Deadline.After(latest) {
			latest = m.Deadline
		}
	}
	return context.WithDeadline(ctx, latest.Add(sendGrace))
}

// unconfigured answers a batch that touches a channel whose config the
// plugin rejected, so the verdict says why instead of "not configured". It
// returns nil in the common case where every channel is fine.
func (p *Plugin) unconfigured(ms []sdk.Message) []sdk.Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rejected) == 0 {
		return nil
	}
	hit := false
	for _, m := range ms {
		if _, bad := p.rejected[m.Channel]; bad {
			hit = true
			break
		}
	}
	if !hit {
		return nil
	}
	// Mixed batches are rare: answer the whole batch rather than split it.
	vs := make([]sdk.Verdict, len(ms))
	for i, m := range ms {
		if err := p.rejected[m.Channel]; err != nil {
			vs[i] = sdk.Transient(fmt.Sprintf("%s: %v", DetailUnavailable, err))
		} else {
			vs[i] = sdk.Transient(DetailUnavailable + ": batch shared with a channel whose config was rejected")
		}
	}
	return vs
}

func all(n int, detail string) []sdk.Verdict {
	vs := make([]sdk.Verdict, n)
	for i := range vs {
		vs[i] = sdk.Transient(detail)
	}
	return vs
}

// Health is nil when the process answers and every channel's provider says
// it is fine.
func (p *Plugin) Health(ctx context.Context) error {
	inst, err := p.await(ctx)
	if err != nil {
		return fmt.Errorf("plugin %s: %w", p.name, err)
	}
	unhealthy, err := inst.rpc.Health(ctx)
	if err != nil {
		return fmt.Errorf("plugin %s: not answering: %w", p.name, err)
	}
	// Only the channels the host gave it: each report is cut to a KiB, but
	// a plugin reporting a thousand channels of its own invention made this
	// error, on every dashboard page and /readyz log line, a megabyte.
	p.mu.Lock()
	for ch := range unhealthy {
		if _, ok := p.configs[ch]; !ok {
			delete(unhealthy, ch)
		}
	}
	p.mu.Unlock()
	if err := providerclient.HealthError(unhealthy); err != nil {
		return fmt.Errorf("plugin %s: %w", p.name, err)
	}
	return nil
}

// await returns the running instance, waiting through a restart until ctx
// ends.
func (p *Plugin) await(ctx context.Context) (*instance, error) {
	for {
		p.mu.Lock()
		inst, up, closing := p.inst, p.up, p.closing
		p.mu.Unlock()
		var poll <-chan time.Time
		switch {
		case closing:
			return nil, ErrClosed
		case inst != nil && !inst.gone():
			return inst, nil
		case inst != nil:
			// Exited, and the supervisor is about to mark it down.
			up, poll = nil, time.After(5*time.Millisecond)
		}
		select {
		case <-up:
		case <-p.stop: // closing is set before stop is closed
		case <-poll:
		case <-ctx.Done():
			p.mu.Lock()
			why := p.downErr
			p.mu.Unlock()
			return nil, fmt.Errorf("down (%v); waited until %w", why, ctx.Err())
		}
	}
}

func (p *Plugin) setUp(inst *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inst, p.downErr = inst, nil
	close(p.up)
}

// setDown marks the plugin down and returns the instance that was up.
func (p *Plugin) setDown(why error) *instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	inst := p.inst
	if inst != nil {
		p.up = make(chan struct{})
	}
	p.inst, p.downErr = nil, why
	return inst
}

// drain waits for in-flight sends until ctx ends; false if some remain.
func (p *Plugin) drain(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// kill stops the process: gracefully (go-plugin asks it to exit, then kills
// it after 2 s) or at once.
func (p *Plugin) kill(graceful bool) {
	inst := p.setDown(ErrClosed)
	if inst != nil {
		inst.stop(graceful)
	}
}

// Callback hands a provider's callback for one of the plugin's channels to
// the plugin (docs/design.md §7, Receipts). A plugin that takes none answers
// providerclient.ErrCallbackUnsupported; one that is down is waited for
// until ctx ends.
func (p *Plugin) Callback(ctx context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	inst, err := p.await(ctx)
	if err != nil {
		return sdk.CallbackAnswer{}, fmt.Errorf("plugin %s: %w", p.name, err)
	}
	ans, err := inst.rpc.Callback(ctx, req)
	if err != nil {
		return sdk.CallbackAnswer{}, fmt.Errorf("plugin %s: %w", p.name, err)
	}
	return ans, nil
}
