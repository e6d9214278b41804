package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

func TestProvider_Configure_perModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		config string
		want   []string // in the error; none: accepted
	}{
		{`"model":"voyage-3.5","output_dimension":2048,"output_dtype":"ubinary"`, nil},
		{`"model":"voyage-4-lite","output_dimension":256,"output_dtype":"int8"`, nil},
		{`"model":"voyage-code-3","output_dimension":300`, []string{"output_dimension", "300", "256, 512, 1024 or 2048"}},
		{`"model":"voyage-3","output_dimension":512`, []string{"output_dimension", "voyage-3", "fixed dimension (1024)"}},
		{`"model":"voyage-code-2","output_dimension":1024`, []string{"output_dimension", "voyage-code-2", "1536"}},
		{`"model":"voyage-law-2","output_dtype":"int8"`, []string{"output_dtype", "voyage-law-2", "float only"}},
		{`"model":"voyage-3-lite","output_dtype":"float"`, nil},
		{`"model":"voyage-finance-2","output_dtype":"binary"`, []string{"output_dtype", "voyage-finance-2", "float only"}},
		// A model not in the table: Voyage decides, the plugin does not.
		{`"model":"voyage-99-preview","output_dimension":2048,"output_dtype":"int8"`, nil},
		{`"model":"voyage-3.5","encoding_format":"float"`, nil},
		{`"model":"voyage-3.5","encoding_format":"base64"`, nil},
		{`"model":"voyage-3.5","encoding_format":"int8"`, []string{"encoding_format", "base64", "float"}},
	}
	for _, tt := range tests {
		raw := json.RawMessage(`{"api_key":"k",` + tt.config + `}`)
		_, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: raw})
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("Configure(%s) = %v; want it accepted", raw, err)
		case tt.want != nil && err == nil:
			t.Errorf("Configure(%s) accepted; want an error saying %q", raw, tt.want)
		case err != nil:
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Configure(%s) error %q; want it to say %q", raw, err, w)
				}
			}
		}
	}
}

// TestSender_Send_perModel: a payload that overrides the model or its
// output is checked against that model before anything is sent.
func TestSender_Send_perModel(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "output_dimension": 512})
	for _, tt := range []struct{ payload, want string }{
		{`{"input":"a","model":"voyage-3"}`, "output_dimension is 512; voyage-3 has a fixed dimension (1024)"},
		{`{"input":"a","model":"voyage-law-2","output_dimension":null,"output_dtype":"uint8"}`, "output_dimension is 512; voyage-law-2"},
		{`{"input":"a","output_dimension":4096}`, "output_dimension is 4096; want 256, 512, 1024 or 2048"},
	} {
		v := s.Send(context.Background(), message(tt.payload))
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, tt.want) {
			t.Errorf("Send(%s) = %v %q; want PERMANENT saying %q", tt.payload, v.Outcome, v.Detail, tt.want)
		}
	}
	law := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-law-2"})
	if v := law.Send(context.Background(), message(`{"input":"a","output_dtype":"int8"}`)); v.Outcome != sdk.OutcomePermanent ||
		!strings.Contains(v.Detail, `output_dtype is "int8"; voyage-law-2 takes float only`) {
		t.Errorf("int8 on voyage-law-2 = %v %q; want PERMANENT naming the model", v.Outcome, v.Detail)
	}
	if n := f.hits.Load(); n != 0 {
		t.Errorf("Voyage got %d requests; want none", n)
	}
	if v := s.Send(context.Background(), message(`{"input":"a","model":"voyage-code-3","output_dtype":"int8"}`)); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("voyage-code-3 int8 at 512 = %v %q; want SUCCESS", v.Outcome, v.Detail)
	}
}
