package main

import (
	"encoding/json"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// conformance is the sdktest suite against a fake Voyage: the same checks
// the host relies on, in-process and as the built binary.
func conformance(t *testing.T, run func(*testing.T, sdktest.Features) *sdktest.Report) {
	t.Helper()
	f := newFakeVoyage(t)
	cfg, _ := json.Marshal(map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5"})
	rep := run(t, sdktest.Features{
		Config: cfg,
		Invalid: map[string]json.RawMessage{
			"missing api_key":      json.RawMessage(`{"model":"voyage-3.5"}`),
			"missing model":        json.RawMessage(`{"api_key":"k"}`),
			"bad output_dimension": json.RawMessage(`{"api_key":"k","model":"voyage-3.5","output_dimension":7}`),
			"base_url not http":    json.RawMessage(`{"api_key":"k","model":"voyage-3.5","base_url":"ftp://x"}`),
		},
		Succeed:   sdk.Message{Recipient: "doc-1", Payload: json.RawMessage(`{"input":["hello","world"]}`)},
		Permanent: &sdk.Message{Recipient: "doc-2", Payload: json.RawMessage(`{"input":[]}`)},
	})
	if rep.Info.Name != "voyage" {
		t.Errorf("Describe name = %q; want voyage", rep.Info.Name)
	}
	if hits := f.hits.Load(); hits < int64(len(rep.Sent)) {
		t.Errorf("fake Voyage got %d requests for %d successful sends; want at least one each", hits, len(rep.Sent))
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("in-process", func(t *testing.T) {
		t.Parallel()
		conformance(t, func(t *testing.T, f sdktest.Features) *sdktest.Report { return sdktest.Run(t, &provider{}, f) })
	})
	t.Run("binary", func(t *testing.T) {
		t.Parallel()
		bin := testenv.BuildPlugin(t, ".")
		conformance(t, func(t *testing.T, f sdktest.Features) *sdktest.Report { return sdktest.RunBinary(t, bin, f) })
	})
}
