package httpguard

import (
	"context"
	"sync"
)

// shares is what each client holds of a bound (Inflight's bytes of request
// bodies, Answers' bytes of answers), each at most perClient: a client past
// its share waits on its own share before it queues on the bound's
// semaphore, so its waiting requests never sit ahead of other clients'.
type shares struct {
	perClient int64

	mu    sync.Mutex
	held  map[string]int64 // bytes held by each client holding any
	freed chan struct{}    // closed, and replaced, when a client's hold drops
}

func newShares(perClient int64) shares {
	return shares{perClient: perClient, held: map[string]int64{}, freed: make(chan struct{})}
}

// hold reserves n of who's share, waiting for it until ctx ends.
func (s *shares) hold(ctx context.Context, who string, n int64) error {
	for {
		s.mu.Lock()
		if s.held[who]+n <= s.perClient {
			s.held[who] += n
			s.mu.Unlock()
			return nil
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tryHold reserves n of who's share if it is free now.
func (s *shares) tryHold(who string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[who]+n > s.perClient {
		return false
	}
	s.held[who] += n
	return true
}

// unhold gives back n of who's share and wakes its waiters.
func (s *shares) unhold(who string, n int64) {
	s.mu.Lock()
	if s.held[who] -= n; s.held[who] <= 0 {
		delete(s.held, who)
	}
	close(s.freed)
	s.freed = make(chan struct{})
	s.mu.Unlock()
}
