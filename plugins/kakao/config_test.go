package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	t.Run("defaults", func(t *testing.T) {
		c, err := parseConfig(sdk.ConfigureRequest{Config: json.RawMessage(`{"mode":"memo","access_token":"a"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if c.apiURL != APIURLDefault || c.authURL != AuthURLDefault || c.timeout != TimeoutDefault || c.template != nil {
			t.Errorf("defaults = %q %q %v %v, want %q %q %v nil", c.apiURL, c.authURL, c.timeout, c.template, APIURLDefault, AuthURLDefault, TimeoutDefault)
		}
	})
	t.Run("everything", func(t *testing.T) {
		dir := t.TempDir()
		c, err := parseConfig(sdk.ConfigureRequest{Config: json.RawMessage(`{"mode":"friends","access_token":"a","refresh_token":"r","client_id":"id",
			"client_secret":"s","api_url":"http://127.0.0.1:9/kapi/","auth_url":"https://auth.example","timeout":"1.5s",
			"template":{"object_type":"text","text":"{{.x}}","link":{}},"token_file":"` + filepath.Join(dir, "t.json") + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if c.mode != modeFriends || c.apiURL != "http://127.0.0.1:9/kapi" || c.authURL != "https://auth.example" ||
			c.timeout != 1500*time.Millisecond || c.template == nil || c.clientSecret != "s" {
			t.Errorf("config = %+v", c)
		}
	})

	tests := []struct {
		name, config, want string
	}{
		{"empty", ``, "mode"},
		{"not an object", `[1]`, "config:"},
		{"not JSON", `{mode:`, "config:"},
		{"trailing data", `{"mode":"memo","access_token":"a"} {}`, "config:"},
		{"no mode", `{"access_token":"a"}`, "mode"},
		{"bad mode", `{"mode":"group","access_token":"a"}`, "mode"},
		{"mode not a string", `{"mode":1,"access_token":"a"}`, "mode"},
		{"unknown key", `{"mode":"memo","access_token":"a","acess_token":"b"}`, "acess_token"},
		{"no token", `{"mode":"memo"}`, "access_token"},
		{"refresh without client_id", `{"mode":"memo","refresh_token":"r"}`, "client_id"},
		{"secret without refresh", `{"mode":"memo","access_token":"a","client_secret":"s"}`, "client_secret"},
		{"token with newline", `{"mode":"memo","access_token":"a\n"}`, "access_token"},
		{"api_url relative", `{"mode":"memo","access_token":"a","api_url":"kapi.kakao.com"}`, "api_url"},
		{"api_url scheme", `{"mode":"memo","access_token":"a","api_url":"ftp://kapi.kakao.com"}`, "api_url"},
		{"auth_url query", `{"mode":"memo","access_token":"a","auth_url":"https://kauth.kakao.com?x=1"}`, "auth_url"},
		{"timeout bad", `{"mode":"memo","access_token":"a","timeout":"soon"}`, "timeout"},
		{"timeout negative", `{"mode":"memo","access_token":"a","timeout":"-1s"}`, "timeout"},
		{"timeout number", `{"mode":"memo","access_token":"a","timeout":10}`, "timeout"},
		{"template string", `{"mode":"memo","access_token":"a","template":"{{.x}}"}`, "template"},
		{"template no object_type", `{"mode":"memo","access_token":"a","template":{"text":"x"}}`, "template.object_type"},
		{"template bad action", `{"mode":"memo","access_token":"a","template":{"object_type":"text","link":{"web_url":"{{.x"}}}`, "template.link.web_url"},
		{"template bad action in list", `{"mode":"memo","access_token":"a","template":{"object_type":"list","contents":[{"title":"{{if}}"}]}}`, "template.contents[0].title"},
		{"token_file without refresh", `{"mode":"memo","access_token":"a","token_file":"/tmp/x.json"}`, "token_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(sdk.ConfigureRequest{Config: json.RawMessage(tt.config)})
			if err == nil {
				t.Fatalf("no error, want one naming %q", tt.want)
			}
			want := tt.want
			if !strings.HasSuffix(want, ":") {
				want = "config." + want + ":"
			}
			if !strings.Contains(err.Error(), want) && !strings.Contains(err.Error(), `unknown key "`+tt.want+`"`) {
				t.Errorf("error = %q, want it to name %q", err, want)
			}
		})
	}
}

func TestParseConfig_NoSecretsInErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []string{
		`{"mode":"nope","access_token":"` + testAccess + `"}`,
		`{"mode":"memo","access_token":"` + testAccess + ` x"}`,
		`{"mode":"memo","refresh_token":"` + testRefresh + `"}`,
		`{"mode":"memo","access_token":"a","client_secret":"` + testSecret + `"}`,
		`{"mode":"memo","access_token":"a","refresh_token":"` + testRefresh + `","client_id":"c","extra":"` + testSecret + `"}`,
	} {
		_, err := parseConfig(sdk.ConfigureRequest{Config: json.RawMessage(cfg)})
		if err == nil {
			t.Fatalf("config %d: no error", len(cfg))
		}
		for _, s := range []string{testAccess, testRefresh, testSecret} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q reveals a secret", err)
			}
		}
	}
}

// TestParseConfig_unusableURL: an api_url or auth_url (and so
// alimtalk.api_url, read the same way) no request can go to as written is
// refused saying what is wrong with it: a port outside 1-65535 or empty, no
// host name before the port ("http://:8080", this machine). They were
// accepted, and every send failed TRANSIENT until the message was
// dead-lettered.
func TestParseConfig_unusableURL(t *testing.T) {
	t.Parallel()
	for raw, why := range map[string]string{
		"http://127.0.0.1:99999/kapi": "has port 99999, not one of 1-65535",
		"http://127.0.0.1:0":          "has port 0, not one of 1-65535",
		"http://127.0.0.1:/kapi":      "has an empty port",
		"http://:8080/kapi":           "has no host",
		"ftp://kapi.kakao.com":        "must be an http:// or https:// URL",
	} {
		for _, key := range []string{"api_url", "auth_url"} {
			cfg, _ := json.Marshal(map[string]any{"mode": "memo", "access_token": "a", key: raw})
			_, err := parseConfig(sdk.ConfigureRequest{Config: cfg})
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(ce.Reason, why) {
				t.Errorf("%s %q: error = %v; want config.%s saying it %s", key, raw, err, key, why)
			}
		}
	}
}

func TestTokenFile_Config(t *testing.T) {
	t.Parallel()
	p := &provider{}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, "not json")
	for name, tt := range map[string]struct{ path, key string }{
		"missing directory": {filepath.Join(dir, "nope", "t.json"), "token_file"},
		"garbage file":      {bad, "token_file"},
	} {
		t.Run(name, func(t *testing.T) {
			raw, _ := json.Marshal(map[string]any{"mode": "memo", "refresh_token": "r", "client_id": "c", "token_file": tt.path})
			_, err := p.Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: raw})
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tt.key {
				t.Errorf("error = %v, want a ConfigError for %q", err, tt.key)
			}
		})
	}
}

func TestProvider_Describe(t *testing.T) {
	t.Parallel()
	info := (&provider{}).Describe()
	if info.Name != "kakao" || info.Version == "" {
		t.Errorf("info = %+v, want name kakao and a version", info)
	}
	var schema struct {
		Properties           map[string]any `json:"properties"`
		AdditionalProperties bool           `json:"additionalProperties"`
	}
	if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil {
		t.Fatalf("config schema is not JSON: %v", err)
	}
	// The decoder accepts every key the schema names (that the schema names
	// every key the config takes: TestConfigSchema_matchesConfig).
	for k := range schema.Properties {
		if k == "mode" || k == "access_token" {
			continue
		}
		raw := json.RawMessage(`{"` + k + `": null, "mode": "memo", "access_token": "a"}`)
		if _, err := parseConfig(sdk.ConfigureRequest{Config: raw}); err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("decoder rejects schema key %q", k)
		}
	}
}

// TestConfigSchema_matchesConfig: the schema Describe returns (the
// channel config's documentation for tools) names exactly the keys the
// config accepts, at the top and in the alimtalk block and its failover.
func TestConfigSchema_matchesConfig(t *testing.T) {
	t.Parallel()
	type props struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	keysOf := func(schema json.RawMessage) []string {
		var p props
		if err := json.Unmarshal(schema, &p); err != nil {
			t.Fatalf("config schema: %v", err)
		}
		return slices.Sorted(maps.Keys(p.Properties))
	}
	tags := func(typ reflect.Type) []string {
		var out []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	var top props
	if err := json.Unmarshal([]byte(configSchema), &top); err != nil {
		t.Fatalf("config schema: %v", err)
	}
	var at props
	if err := json.Unmarshal(top.Properties["alimtalk"], &at); err != nil {
		t.Fatalf("config schema, alimtalk: %v", err)
	}
	failover, _ := reflect.TypeFor[alimtalkRaw]().FieldByName("Failover")
	for _, c := range []struct {
		where     string
		schema    []string
		structure []string
	}{
		{"the channel config", slices.Sorted(maps.Keys(top.Properties)), tags(reflect.TypeFor[rawConfig]())},
		{"alimtalk", slices.Sorted(maps.Keys(at.Properties)), tags(reflect.TypeFor[alimtalkRaw]())},
		{"alimtalk.failover", keysOf(at.Properties["failover"]), tags(failover.Type.Elem())},
	} {
		if !slices.Equal(c.schema, c.structure) {
			t.Errorf("%s: the schema names %v, the config takes %v", c.where, c.schema, c.structure)
		}
	}
}
