package sdk_test

import (
	"encoding/json"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

type common struct {
	Debug bool `json:"debug"`
}

func TestConfigureRequest_Decode(t *testing.T) {
	t.Parallel()
	type cfg struct {
		common
		Secret  string            `json:"-"`
		URL     string            `json:"url"`
		Timeout int               `json:"timeout"`
		Headers map[string]string `json:"headers"`
		Retry   struct {
			Max int `json:"max"`
		} `json:"retry"`
	}
	tests := []struct {
		in, wantErr string
	}{
		{`{"url":"http://127.0.0.1","timeout":3,"headers":{"a":"b"},"retry":{"max":2}}`, ""},
		{``, ""},
		{`null`, ""},
		{`{"ulr":"x"}`, `config: unknown key "ulr" (known: debug, headers, retry, timeout, url)`},
		{`{"URL":"x","retry":{"maxx":2}}`, `config: unknown key "retry.maxx" (known: max)`},
		{`{"debug":true,"secret":"x"}`, `config: unknown key "secret" (known: debug, headers, retry, timeout, url)`},
		{`{"timeout":"3s"}`, `config.timeout: want a number, got string`},
		{`{"retry":{"max":"x"}}`, `config.retry.max: want a number, got string`},
		{`{"headers":[1]}`, `config.headers: want an object, got array`},
		{`[1]`, `config: want an object, got array`},
		{`{"url":}`, `config: invalid JSON at byte 8: invalid character '}' looking for beginning of value`},
		{`{} {}`, `config: unexpected data after the JSON object`},
	}
	for _, tt := range tests {
		var c cfg
		err := sdk.ConfigureRequest{Config: json.RawMessage(tt.in)}.Decode(&c)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.wantErr {
			t.Errorf("Decode(%s): got error %q, want %q", tt.in, got, tt.wantErr)
		}
	}
}
