package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/testenv"
)

// A channel whose plugin cannot start (no handshake, or no answer to
// Configure, while a grandchild it left holds its pipes) is stopped with
// the reason naming the plugin and plugins.start_timeout; the channel
// beside it starts and delivers.
func TestEngine_Start_PluginThatCannotStart(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil), func(c *config.Config, _ *config.Channel) { c.Plugins.StartTimeout = time.Second })
	for _, name := range []string{"sessionhog", "sessionhog-mute"} {
		exe := testenv.InstallPlugin(t, b.cfg.Plugins.Dir, name, "github.com/notifyd/notifyd/internal/pluginhost/testdata/sessionhog")
		t.Cleanup(func() { killGrandchildren(exe) })
		// Sorted before the good channel: a start in sequence would try
		// these first.
		b.cfg.Channels["a-"+name] = config.FillChannel(config.Channel{Plugin: name})
	}
	e, _ := b.engineHost("", delivery.Hooks{})
	id := b.send("r1", "")
	if n := b.wait(id, 60*time.Second); n.Status != outbox.StatusSent {
		t.Errorf("notification on the good channel: %s (%s), want SENT", n.Status, n.LastError)
	}
	for _, st := range e.Channels(context.Background()) {
		switch st.Name {
		case testChannel:
			if !st.Running {
				t.Errorf("channel %s stopped (%s), want running", st.Name, st.Error)
			}
		default:
			if st.Running || !strings.Contains(st.Error, "plugin "+st.Plugin) || !strings.Contains(st.Error, "plugins.start_timeout") {
				t.Errorf("channel %s: running %v, error %q; want stopped with an error naming plugin %s and plugins.start_timeout", st.Name, st.Running, st.Error, st.Plugin)
			}
		}
	}
}

// Channels start side by side: a channel whose plugin start waits until
// another channel's plugin was asked for starts only if the engine does
// not start them in sequence (it sorts first, so in sequence it would wait
// for a channel that comes after it).
func TestEngine_Start_ChannelsSideBySide(t *testing.T) {
	t.Parallel()
	b := setup(t, newSink(t, nil))
	b.cfg.Channels["a-gated"] = config.FillChannel(config.Channel{Plugin: "webhook", Config: b.cfg.Channels[testChannel].Config})
	host := pluginhost.New(b.cfg.Plugins, b.log.Named("plugins"))
	g := &gate{host: host, open: make(chan struct{})}
	e, _ := b.start(delivery.Options{Providers: g})
	t.Cleanup(func() { _ = host.Stop(context.Background()) })
	for _, st := range e.Channels(context.Background()) {
		if !st.Running {
			t.Errorf("channel %s stopped: %s", st.Name, st.Error)
		}
	}
}

// gate holds the Configure of channel a-gated until the channel after it
// was configured (or 30 s passed).
type gate struct {
	host   *pluginhost.Host
	open   chan struct{}
	opened sync.Once
}

func (g *gate) Provider(ctx context.Context, name string) (delivery.Provider, error) {
	p, err := g.host.Plugin(ctx, name)
	if err != nil {
		return nil, err
	}
	return gated{Plugin: p, g: g}, nil
}

type gated struct {
	*pluginhost.Plugin
	g *gate
}

func (p gated) Configure(ctx context.Context, channel string, cfg json.RawMessage) error {
	if channel != "a-gated" {
		p.g.opened.Do(func() { close(p.g.open) })
		return p.Plugin.Configure(ctx, channel, cfg)
	}
	select {
	case <-p.g.open:
		return p.Plugin.Configure(ctx, channel, cfg)
	case <-time.After(30 * time.Second):
		return errors.New("the other channel was not configured meanwhile: channels start in sequence")
	}
}

// killGrandchildren kills what the sessionhog at exe left running.
func killGrandchildren(exe string) {
	raw, _ := os.ReadFile(exe + ".children")
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
