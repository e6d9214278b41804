package notifyd

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestHandoff_turns: a connection that arrives between turns waits for the
// next turn instead of being refused; ending a turn leaves the socket open,
// ending the last one closes it.
func TestHandoff_turns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := newHandoff(ln)
	t.Cleanup(h.close)
	addr := ln.Addr().String()

	first := h.turn(false)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	dial()
	if c, err := first.Accept(); err != nil {
		t.Fatalf("first turn Accept: %v", err)
	} else {
		_ = c.Close()
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on an ended turn = %v, want net.ErrClosed", err)
	}

	// Between turns: the dial succeeds (backlog), the next turn gets it.
	between := dial()
	last := h.turn(true)
	c, err := last.Accept()
	if err != nil {
		t.Fatalf("last turn Accept: %v", err)
	}
	if c.RemoteAddr().String() != between.LocalAddr().String() {
		t.Errorf("last turn got %s, want the connection dialled between turns (%s)", c.RemoteAddr(), between.LocalAddr())
	}
	_ = c.Close()
	if last.Addr().String() != addr {
		t.Errorf("turn Addr = %s, want %s", last.Addr(), addr)
	}

	if err := last.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Errorf("%s accepts connections after the last turn closed", addr)
	}
}
