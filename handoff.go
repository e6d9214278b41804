package notifyd

import (
	"errors"
	"net"
	"sync"
)

// handoff holds http.listen's socket while the stand-in and then the API
// take turns serving it, so the address never stops accepting: between
// turns a connection waits in the backlog instead of being refused, and a
// port chosen for port 0 stays this process's.
type handoff struct {
	ln      net.Listener
	conns   chan accepted // to whichever turn is accepting
	closed  chan struct{} // the socket is closed
	closing sync.Once
}

type accepted struct {
	c   net.Conn
	err error
}

func newHandoff(ln net.Listener) *handoff {
	h := &handoff{ln: ln, conns: make(chan accepted), closed: make(chan struct{})}
	go h.accept()
	return h
}

// accept is the socket's one Accept loop. Errors go to the turn too: its
// http.Server retries the temporary ones, as it would on the socket.
func (h *handoff) accept() {
	for {
		c, err := h.ln.Accept()
		select {
		case h.conns <- accepted{c, err}:
		case <-h.closed:
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

func (h *handoff) close() {
	h.closing.Do(func() {
		close(h.closed)
		_ = h.ln.Close()
	})
}

// turn is a net.Listener over the socket for one server. Closing it ends
// the turn; closing the last turn (the API's) closes the socket.
func (h *handoff) turn(last bool) net.Listener {
	return &turn{h: h, last: last, ended: make(chan struct{})}
}

type turn struct {
	h     *handoff
	last  bool
	ended chan struct{}
	once  sync.Once
}

func (t *turn) Accept() (net.Conn, error) {
	select {
	case <-t.ended:
		return nil, net.ErrClosed
	case <-t.h.closed:
		return nil, net.ErrClosed
	case a := <-t.h.conns:
		select {
		case <-t.ended:
			// Taken in the instant the turn ended: the next turn's.
			go func() {
				select {
				case t.h.conns <- a:
				case <-t.h.closed:
					if a.c != nil {
						_ = a.c.Close()
					}
				}
			}()
			return nil, net.ErrClosed
		default:
			return a.c, a.err
		}
	}
}

func (t *turn) Close() error {
	t.once.Do(func() {
		close(t.ended)
		if t.last {
			t.h.close()
		}
	})
	return nil
}

func (t *turn) Addr() net.Addr { return t.h.ln.Addr() }
