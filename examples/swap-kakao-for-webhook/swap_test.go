// Package swap keeps the swap-kakao-for-webhook example honest: the two
// config files must load, differ only in the channel's plugin and config,
// and each config must be accepted by its real plugin.
package swap

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/internal/testenv"
)

const channel = "daily-quiz"

// environ stands in for the Kakao secrets kakao.yaml takes from the
// environment.
var environ = []string{
	"KAKAO_ACCESS_TOKEN=test-access-token",
	"KAKAO_REFRESH_TOKEN=test-refresh-token",
	"KAKAO_REST_API_KEY=test-rest-api-key",
	"NOTIFYD_API_TOKEN=swap-example-test-token",
}

func load(t *testing.T) (kakao, webhook *config.Config) {
	t.Helper()
	var err error
	if kakao, err = config.Load("kakao.yaml", environ); err != nil {
		t.Fatalf("load kakao.yaml: %v", err)
	}
	if webhook, err = config.Load("webhook.yaml", environ); err != nil {
		t.Fatalf("load webhook.yaml: %v", err)
	}
	for name, c := range map[string]*config.Config{"kakao.yaml": kakao, "webhook.yaml": webhook} {
		if _, ok := c.Channels[channel]; !ok {
			t.Fatalf("%s has no channel %q", name, channel)
		}
	}
	return kakao, webhook
}

func TestSwap_onlyPluginAndConfigDiffer(t *testing.T) {
	t.Parallel()
	kakao, webhook := load(t)
	kc, wc := kakao.Channels[channel], webhook.Channels[channel]

	if kc.Plugin != "kakao" || wc.Plugin != "webhook" {
		t.Errorf("plugins = %q and %q, want kakao and webhook", kc.Plugin, wc.Plugin)
	}
	if got := kc.Config["access_token"]; got != "test-access-token" {
		t.Errorf("kakao access_token = %v, want it taken from KAKAO_ACCESS_TOKEN", got)
	}
	if reflect.DeepEqual(kc.Config, wc.Config) {
		t.Errorf("the two channels have the same config %v; the example is meant to swap it", kc.Config)
	}

	// With the webhook file's plugin and config replaced by Kakao's, the two
	// configurations must be identical.
	wc.Plugin, wc.Config = kc.Plugin, kc.Config
	webhook.Channels[channel] = wc
	if diffs := diff("", reflect.ValueOf(*kakao), reflect.ValueOf(*webhook)); len(diffs) > 0 {
		for _, d := range diffs {
			t.Errorf("kakao.yaml and webhook.yaml differ beyond channels.%s.plugin and .config: %s", channel, d)
		}
	}
}

func TestSwap_pluginsAcceptTheirConfig(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	kakao, webhook := load(t)
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "kakao", "github.com/notifyd/notifyd/plugins/kakao")
	testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	host := pluginhost.New(config.Plugins{Dir: dir}, nil)
	t.Cleanup(func() { _ = host.Stop(testenv.Context(t)) })

	for file, cfg := range map[string]*config.Config{"kakao.yaml": kakao, "webhook.yaml": webhook} {
		t.Run(file, func(t *testing.T) {
			ch := cfg.Channels[channel]
			p, err := host.Plugin(ctx, ch.Plugin)
			if err != nil {
				t.Fatalf("start plugin %s: %v", ch.Plugin, err)
			}
			raw, err := json.Marshal(ch.Config)
			if err != nil {
				t.Fatalf("encode config: %v", err)
			}
			if err := p.Configure(ctx, channel, raw); err != nil {
				t.Errorf("plugin %s refuses the config of %s: %v", ch.Plugin, file, err)
			}
		})
	}
}

// diff lists the paths at which a and b differ, descending into structs and
// maps so a failure names the key.
func diff(path string, a, b reflect.Value) []string {
	switch a.Kind() {
	case reflect.Struct:
		var out []string
		for i := range a.NumField() {
			name := a.Type().Field(i).Tag.Get("koanf")
			if name == "" {
				name = a.Type().Field(i).Name
			}
			out = append(out, diff(join(path, name), a.Field(i), b.Field(i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range a.MapKeys() {
			key := join(path, fmt.Sprint(k.Interface()))
			if bv := b.MapIndex(k); !bv.IsValid() {
				out = append(out, key+" is only in kakao.yaml")
			} else {
				out = append(out, diff(key, a.MapIndex(k), bv)...)
			}
		}
		for _, k := range b.MapKeys() {
			if !a.MapIndex(k).IsValid() {
				out = append(out, join(path, fmt.Sprint(k.Interface()))+" is only in webhook.yaml")
			}
		}
		return out
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return []string{fmt.Sprintf("%s: %v in kakao.yaml, %v in webhook.yaml", path, a.Interface(), b.Interface())}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
