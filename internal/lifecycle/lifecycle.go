// Package lifecycle is the one shape of notifyd's long-running parts and the
// one place they are started and stopped (docs/design.md §1, Lifecycle).
//
// A Part starts with Start(ctx), which returns once it runs (ctx bounds the
// start, not the life), and stops with Stop(ctx), which stops it and waits,
// bounded by ctx. A Group starts parts in the order they are added and stops
// them in reverse, under one timeout policy:
//
//   - every Stop is bounded by the context Group.Stop is given (the daemon's
//     shutdown.hard_timeout), and by the part's own Bound when it has one (the
//     API's: shutdown.soft_timeout, so that a slow request leaves the engine
//     its time to drain);
//   - a part that is also a Killer and whose Stop ran out of time is killed;
//   - once that context has ended, what is left is still released, each with
//     Grace (5 s) of its own: a resource (a pool, the plugin processes, the
//     span exporter) must never be left open because the parts before it
//     were slow;
//   - a step that has not returned LeaveBehind (1 s) after its context ended
//     (a release that takes no context) is left running, its error says so,
//     and the next step runs.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Part is a long-running part of the daemon.
type Part interface {
	// Start starts the part and returns once it runs; ctx bounds the start.
	Start(ctx context.Context) error
	// Stop stops the part and waits for it, bounded by ctx.
	Stop(ctx context.Context) error
}

// Killer is a part that can be stopped at once, as a crash would (the
// delivery engine: what it had in flight is recovered by the next start).
type Killer interface{ Kill() }

// Grace is how long each step left to run after the group's stop context
// ended gets, so that every resource is still released.
const Grace = 5 * time.Second

// Group starts parts in order and stops them in reverse. It is not safe for
// concurrent use: one goroutine builds the daemon, and Stop runs after it.
type Group struct {
	log   hclog.Logger
	steps []step
}

type step struct {
	name  string
	stop  func(context.Context) error
	kill  func()
	bound time.Duration
}

// NewGroup returns an empty group that logs failed stops to log (nil: nowhere).
func NewGroup(log hclog.Logger) *Group {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Group{log: log}
}

// Option changes how one part is stopped.
type Option func(*step)

// Bound bounds the part's Stop by d as well as by the group's context.
func Bound(d time.Duration) Option { return func(s *step) { s.bound = d } }

// Start starts p and, once it runs, adds it to the group, to be stopped
// before everything added earlier. A part that fails to start is not added.
func (g *Group) Start(ctx context.Context, name string, p Part, opts ...Option) error {
	if err := p.Start(ctx); err != nil {
		return err
	}
	s := step{name: name, stop: p.Stop}
	if k, ok := p.(Killer); ok {
		s.kill = k.Kill
	}
	for _, o := range opts {
		o(&s)
	}
	g.steps = append(g.steps, s)
	return nil
}

// Defer adds the release of a resource acquired now (a pool, a client, a
// lock): it runs on Stop, after the parts added later have stopped.
func (g *Group) Defer(name string, release func(context.Context) error, opts ...Option) {
	s := step{name: name, stop: release}
	for _, o := range opts {
		o(&s)
	}
	g.steps = append(g.steps, s)
}

// Stop stops and releases everything in reverse order under the policy in
// the package comment, and empties the group. It returns the errors of the
// parts that failed to stop (a stop that ran out of time included), joined;
// each is logged as well.
func (g *Group) Stop(ctx context.Context) error {
	var errs []error
	for i := len(g.steps) - 1; i >= 0; i-- {
		s := g.steps[i]
		sctx, cancel := g.stopContext(ctx, s.bound)
		err := g.stopStep(sctx, s)
		if s.kill != nil && sctx.Err() != nil {
			s.kill() // out of time: what it still had running stops now
		}
		cancel()
		if err != nil {
			g.log.Warn("stop "+s.name, "error", err)
			errs = append(errs, fmt.Errorf("stop %s: %w", s.name, err))
		}
	}
	g.steps = nil
	return errors.Join(errs...)
}

// LeaveBehind is how long a step may still take once its context has
// ended before Stop leaves it running and goes on to the next: a release
// that takes no context (pgxpool's Close waits for every connection it lent
// to come back) would otherwise hold Stop, and every step after it, for
// ever.
const LeaveBehind = time.Second

// stopStep runs s's stop, and returns when it does, or LeaveBehind after
// ctx ended with an error saying it was left behind.
func (g *Group) stopStep(ctx context.Context, s step) error {
	done := make(chan error, 1)
	go func() { done <- s.stop(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(LeaveBehind)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("did not return %s after its time ran out (%w); left running", LeaveBehind, context.Cause(ctx))
	}
}

// stopContext is one step's context: ctx, bounded by bound when set; a
// fresh Grace once ctx has ended.
func (g *Group) stopContext(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), Grace)
	}
	if bound > 0 {
		return context.WithTimeout(ctx, bound)
	}
	return context.WithCancel(ctx)
}
