package pluginhost

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// The host's gRPC connection to a plugin is read within a budget of HTTP/2
// frames: FrameRate a second, FrameBurst at once, a frame counting one and
// one more for each 16 KiB it carries. gRPC answers every PING and SETTINGS
// a peer sends and reads every frame it is sent, whatever the calls in
// flight: a plugin writing PING frames as fast as the host read them cost
// the host 118% of a core (two on the test machine), while its calls went on
// and its health checks passed, so it was never replaced. Past the budget
// the host reads the connection later, so gRPC's own flow control and the
// socket hold the plugin's writes back, and the answers to its own calls
// wait behind them (measured: 1-2% of a core, each answer ~0.3 s later). A
// call's answers are a few frames, and 64 MiB of results is 8,192 units:
// within one burst.
const (
	FrameRate  = 50_000 // units a second
	FrameBurst = 50_000 // units at once, after a quiet spell
)

// frameUnit is the payload that counts as one more frame.
const frameUnit = 16 << 10

// frameConn is the host's end of a plugin's gRPC connection, its reads held
// to the frame budget. It reads the frames' 9-byte headers as they go by,
// nothing else.
type frameConn struct {
	net.Conn
	lim   *rate.Limiter
	taken *atomic.Int64 // units read so far (tests read it)
	// closed ends a wait for the budget: a connection the host closes is not
	// read again.
	closed chan struct{}
	once   sync.Once

	hdr  [9]byte // the frame header being read
	have int     // bytes of hdr read
	skip int     // payload bytes of the current frame still to come
}

func newFrameConn(c net.Conn, taken *atomic.Int64) *frameConn {
	return &frameConn{Conn: c, lim: rate.NewLimiter(FrameRate, FrameBurst), taken: taken, closed: make(chan struct{})}
}

func (c *frameConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if units := c.scan(b[:n]); units > 0 {
		c.taken.Add(int64(units))
		c.wait(units)
	}
	return n, err
}

func (c *frameConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// scan counts the frames whose headers are in b, in units (FrameRate's).
func (c *frameConn) scan(b []byte) int {
	units := 0
	for len(b) > 0 {
		if c.skip > 0 {
			k := min(c.skip, len(b))
			c.skip -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.have:], b)
		c.have += k
		b = b[k:]
		if c.have < len(c.hdr) {
			break
		}
		c.have = 0
		c.skip = int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
		units += 1 + c.skip/frameUnit
	}
	return units
}

// wait holds the read until units fit the budget, or the connection is
// closed.
func (c *frameConn) wait(units int) {
	for units > 0 {
		k := min(units, FrameBurst)
		units -= k
		r := c.lim.ReserveN(time.Now(), k)
		if !r.OK() {
			return
		}
		if d := r.Delay(); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
				return
			}
		}
	}
}

// dial is the host's gRPC dialer for the plugin (go-plugin's, taking its
// place: ClientConfig.GRPCDialOptions come after it): the address the plugin
// gave in its handshake (PluginToHost), read within the frame budget.
func (r *procRunner) dial(ctx context.Context, _ string) (net.Conn, error) {
	r.addrMu.Lock()
	network, addr := r.network, r.addr
	r.addrMu.Unlock()
	if addr == "" {
		return nil, errors.New("the plugin gave no address in its handshake")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return newFrameConn(c, &r.frames), nil
}
