package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
)

// quoter refuses a config it dislikes by quoting all of it, as a careless
// plugin might: the token, a URL with credentials, and lines of text.
type quoter struct{}

func (quoter) Describe() sdk.Info { return sdk.Info{Name: "quoter", Version: "1"} }

func (quoter) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	if !strings.Contains(string(req.Config), "tok-") {
		return sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Verdict{} }), nil
	}
	return nil, errors.New("quoter config: refused " + string(req.Config) +
		"\nsee https://alice:pw-0123@example.test/docs\n" + strings.Repeat("and more ", 100))
}

func TestService_Channels_Stopped(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	cfg := config.Default()
	cfg.Postgres.URL, cfg.Redis.URL, cfg.Redis.Prefix = db.URL, rds.URL, rds.Prefix
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Channels = map[string]config.Channel{
		"ok":  config.FillChannel(config.Channel{Plugin: "quoter"}),
		"bad": config.FillChannel(config.Channel{Plugin: "quoter", Config: map[string]any{"auth": map[string]any{"token": "tok-0123456789"}}}),
	}
	ctx := testenv.Context(t)
	providers := notifyd.NewInProcess(map[string]sdk.Provider{"quoter": quoter{}}, nil)
	t.Cleanup(providers.Close) // after the daemon's Stop (cleanups run last-in first-out)
	d, err := notifyd.Start(ctx, &cfg, notifyd.Options{Providers: providers, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	ops := d.Service()

	states, err := ops.Channels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 || states[0].Name != "bad" || states[0].Running || !states[1].Running || states[1].Error != "" {
		t.Fatalf("states %+v, want bad stopped and ok running", states)
	}
	reason := states[0].Error
	for _, leak := range []string{"tok-0123456789", "pw-0123", "\n"} {
		if strings.Contains(reason, leak) {
			t.Errorf("reason %q contains %q", reason, leak)
		}
	}
	if !strings.Contains(reason, "quoter config: refused ") || !strings.Contains(reason, sdk.Redacted) || len(reason) > service.MaxStoppedReasonBytes {
		t.Errorf("reason %q (%d bytes), want the plugin's words redacted, on one line, within %d bytes", reason, len(reason), service.MaxStoppedReasonBytes)
	}

	warnings := ops.StoppedWarnings(ctx, "ok", "bad")
	if len(warnings) != 1 || warnings["bad"] != "channel bad is stopped on this instance: "+reason+"; the notification is kept and sent once the channel runs" {
		t.Errorf("warnings %q, want bad's alone with its reason", warnings)
	}
	if w := ops.StoppedWarnings(ctx, "ok"); w != nil {
		t.Errorf("warnings for a running channel: %q", w)
	}
	ov, err := ops.Overview(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if ov.Channels[0].Name != "bad" || ov.Channels[0].Error != reason {
		t.Errorf("overview's bad channel: %+v, want the same reason", ov.Channels[0])
	}
}
