package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is a toxiproxy TCP proxy, embedded in the test process, in front of
// one service: every notifyd instance reaches Redis and Postgres through one,
// so the suite can add latency, stall connections or reset them.
type Proxy struct {
	Name string
	Addr string // where clients connect (loopback, a free port)

	p    *toxiproxy.Proxy
	mu   sync.Mutex
	next int
}

// Toxic is one toxiproxy toxic, as its JSON API takes it.
type Toxic struct {
	Type       string         // latency, timeout, reset_peer, ...
	Stream     string         // upstream or downstream; "" = downstream
	Toxicity   float64        // share of connections affected; 0 = all
	Attributes map[string]any // the toxic's own, e.g. {"latency": 200, "jitter": 50}
}

// NewProxyServer is the toxiproxy server the suite's proxies belong to, with
// its logging switched off.
func NewProxyServer() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
}

// StartProxy listens on listen ("" = a free loopback port) and forwards to
// upstream.
func StartProxy(server *toxiproxy.ApiServer, name, listen, upstream string) (*Proxy, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	p := toxiproxy.NewProxy(server, name, listen, upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("proxy %s: start: %w", name, err)
	}
	return &Proxy{Name: name, Addr: p.Listen, p: p}, nil
}

// Add adds a toxic and returns its name.
func (p *Proxy) Add(t Toxic) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	name := fmt.Sprintf("%s-%s-%d", p.Name, t.Type, p.next)
	stream := t.Stream
	if stream == "" {
		stream = "downstream"
	}
	tox := t.Toxicity
	if tox == 0 {
		tox = 1
	}
	body, err := json.Marshal(map[string]any{
		"name": name, "type": t.Type, "stream": stream, "toxicity": tox, "attributes": t.Attributes,
	})
	if err != nil {
		return "", err
	}
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		return "", fmt.Errorf("proxy %s: add %s toxic: %w", p.Name, t.Type, err)
	}
	return name, nil
}

// Clear removes every toxic: the network is healthy again.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p.Toxics.ResetToxics(context.Background())
}

// Stop closes the proxy and every connection through it: to its clients the
// service is down (connection refused).
func (p *Proxy) Stop() { p.p.Stop() }

// Start listens again on the same address after Stop.
func (p *Proxy) Start() error { return p.p.Start() }

// Remove removes one toxic by the name Add returned.
func (p *Proxy) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("proxy %s: remove toxic %s: %w", p.Name, name, err)
	}
	return nil
}
