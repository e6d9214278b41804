package config

import (
	"strings"
	"testing"
)

// TestLoad_Callback: a channel's callback is off by default, filled with its
// defaults when a secret is set, and every bad value is refused naming its
// key — never quoting the secret.
func TestLoad_Callback(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-0123456789abcdef"
	cfg, err := Load(write(t, minimal+"channels: {a: {plugin: w}, b: {plugin: w, callback: {secret: \""+secret+"\"}}}\n"), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if cb := cfg.Channels["a"].Callback; cb.Enabled() {
		t.Errorf("channel a: callback %+v on without a secret", cb)
	}
	if cb := cfg.Channels["b"].Callback; !cb.Enabled() || cb.Header != DefaultCallbackHeader || cb.MaxBodyBytes != DefaultCallbackMaxBodyBytes {
		t.Errorf("channel b: callback header %q max %d; want the defaults", cb.Header, cb.MaxBodyBytes)
	}
	for _, tt := range []struct{ callback, key string }{
		{`{secret: "short-SECRET"}`, "callback.secret"},
		{`{secret: "with space-SECRET-0123456789"}`, "callback.secret"},
		{`{secret: "` + secret + `", header: "X Bad"}`, "callback.header"},
		{`{secret: "` + secret + `", max_body_bytes: 2000000}`, "callback.max_body_bytes"},
		{`{secret: "` + secret + `", max_body_bytes: -1}`, "callback.max_body_bytes"},
	} {
		_, err := Load(write(t, minimal+"channels: {a: {plugin: w, callback: "+tt.callback+"}}\n"), []string{})
		if err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s: error %v; want one naming %s", tt.callback, err, tt.key)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error quotes the secret: %v", tt.callback, err)
		}
	}
}
