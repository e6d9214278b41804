package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// inputs is a payload of n texts ("text 0" …).
func inputs(n int, extra string) string {
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("text %d", i)
	}
	b, _ := json.Marshal(texts)
	return `{"input":` + string(b) + extra + `}`
}

// With output_dimension 256 float, one input is estimated at 64 + 256×18 =
// 4672 bytes stored and 64 + 1368 = 1432 as base64 on the wire; the envelope
// is 128 + len(`"voyage-3.5"`) = 140. max_result_bytes 20000 then stores 4
// inputs at most: (20000-140)/4672.
const smallResult = 20000

func TestSizing(t *testing.T) {
	t.Parallel()
	z := newSizing(params{Model: "voyage-3.5", OutputDimension: 256}, EncodingBase64, smallResult)
	if z.fitStored() != 4 || z.fitAnswer() != 13 || z.stored(4) != 18828 {
		t.Errorf("sizing = fit %d stored, %d answer, stored(4) %d; want 4, 13, 18828", z.fitStored(), z.fitAnswer(), z.stored(4))
	}
	// The host's 4 MiB bound applies however high max_result_bytes is.
	big := newSizing(params{Model: "voyage-3.5"}, EncodingBase64, 64<<20)
	if big.storeLimit != 4<<20 || big.fitStored() != 226 {
		t.Errorf("max_result_bytes 64 MiB: store limit %d, fit %d; want 4 MiB, 226 inputs at 1024 floats", big.storeLimit, big.fitStored())
	}
	for _, tt := range []struct {
		p    params
		want int
	}{
		{params{Model: "voyage-3.5", OutputDtype: "int8"}, 809},    // (4 MiB - 140) / (64 + 1024×5)
		{params{Model: "voyage-3.5", OutputDtype: "binary"}, 1000}, // 5957, capped at Voyage's 1000 inputs
		{params{Model: "voyage-code-2"}, 151},                      // 1536 dims
		{params{Model: "voyage-3-lite"}, 451},                      // 512 dims
		{params{Model: "voyage-99-preview"}, 113},                  // unknown: 2048 assumed
		{params{Model: "voyage-3.5", OutputDimension: 2048}, 113},
	} {
		if got := newSizing(tt.p, EncodingBase64, DefaultMaxResultBytes).fitStored(); got != tt.want {
			t.Errorf("fitStored(%+v) = %d; want %d", tt.p, got, tt.want)
		}
	}
}

func TestSender_Send_tooBigWithoutCallback(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
		"output_dimension": 256, "max_result_bytes": smallResult})
	v := s.Send(context.Background(), message(inputs(10, "")))
	if v.Outcome != sdk.OutcomePermanent {
		t.Fatalf("verdict = %v %q; want PERMANENT", v.Outcome, v.Detail)
	}
	for _, want := range []string{"estimated at 46860 bytes", "over the 20000 bytes", "at most 4 inputs per notification",
		"output_dimension", "int8 or binary", "callback_url"} {
		if !strings.Contains(v.Detail, want) {
			t.Errorf("detail = %q; want it to say %q", v.Detail, want)
		}
	}
	// The default: 1000 inputs at 1024 floats is over the host's 4 MiB.
	s = configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5"})
	if v := s.Send(context.Background(), message(inputs(227, ""))); v.Outcome != sdk.OutcomePermanent ||
		!strings.Contains(v.Detail, "at most 226 inputs") {
		t.Errorf("227 inputs: verdict = %v %q; want PERMANENT naming 226", v.Outcome, v.Detail)
	}
	if n := f.hits.Load(); n != 0 {
		t.Errorf("Voyage got %d requests; want none: a result that cannot be stored is never paid for", n)
	}
	if v := s.Send(context.Background(), message(inputs(226, ""))); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("226 inputs: verdict = %v %q; want SUCCESS", v.Outcome, v.Detail)
	}
}

func TestSender_Send_parts(t *testing.T) {
	t.Parallel()
	f, cb := newFakeVoyage(t), newCallbackSink(t)
	s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
		"output_dimension": 256, "max_result_bytes": smallResult, "callback_url": cb.URL})
	v := s.Send(context.Background(), message(inputs(10, "")))
	if v.Outcome != sdk.OutcomeSuccess {
		t.Fatalf("verdict = %v %q; want SUCCESS", v.Outcome, v.Detail)
	}

	// Voyage: 3 requests of 4, 4 and 2 inputs, no answer over the limit.
	var sent []int
	for range 3 {
		sent = append(sent, len(f.next(t).body["input"].([]any)))
	}
	if fmt.Sprint(sent) != "[4 4 2]" || f.hits.Load() != 3 {
		t.Errorf("requests = %v (%d in all); want [4 4 2]", sent, f.hits.Load())
	}
	if got := f.answered.Load(); got > smallResult {
		t.Errorf("largest answer = %d bytes; want at most max_result_bytes %d", got, smallResult)
	}

	// The callback: one POST per part, reassembled by index.
	embeddings := make([][]float64, 10)
	tokens := 0
	keys := map[string]bool{}
	for k := 1; k <= 3; k++ {
		got := <-cb.got
		var body struct {
			Part, Parts, Offset int
			Result              result
		}
		if err := json.Unmarshal(got.raw, &body); err != nil {
			t.Fatalf("callback %s: %v", got.raw, err)
		}
		if body.Part != k || body.Parts != 3 || body.Offset != (k-1)*4 {
			t.Errorf("callback %d: part %d of %d at %d; want part %d of 3 at %d", k, body.Part, body.Parts, body.Offset, k, (k-1)*4)
		}
		if len(got.raw) > smallResult+512 {
			t.Errorf("callback %d is %d bytes; want a part the size of a storable result", k, len(got.raw))
		}
		keys[got.header.Get("Idempotency-Key")] = true
		tokens += body.Result.Usage.TotalTokens
		for _, d := range body.Result.Data {
			if embeddings[d.Index] != nil {
				t.Errorf("index %d came twice", d.Index)
			}
			embeddings[d.Index] = d.Embedding
			// The fake numbers each answer's inputs from 0: the plugin
			// turns them into positions in the notification's input.
			if len(d.Embedding) != 256 || d.Embedding[0] != float64(d.Index-body.Offset) {
				t.Errorf("data index %d: %d values starting %v; want 256 starting %d", d.Index, len(d.Embedding), d.Embedding[0], d.Index-body.Offset)
			}
		}
	}
	for i, e := range embeddings {
		if e == nil {
			t.Errorf("input %d has no embedding", i)
		}
	}
	if len(keys) != 3 || !keys["doc-7-v3/part-1"] {
		t.Errorf("Idempotency-Keys = %v; want one per part (doc-7-v3/part-N)", keys)
	}

	var summary struct {
		Object        string
		Parts, Inputs int
		Model         string
		Usage         struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(v.Result, &summary); err != nil {
		t.Fatal(err)
	}
	if summary.Object != "parts" || summary.Parts != 3 || summary.Inputs != 10 || summary.Model != "voyage-3.5" ||
		summary.Usage.TotalTokens != tokens || tokens == 0 {
		t.Errorf("result = %s; want a summary of 3 parts, 10 inputs, voyage-3.5, %d tokens", v.Result, tokens)
	}
}

func TestSender_Send_partsCallbackFails(t *testing.T) {
	t.Parallel()
	f, cb := newFakeVoyage(t), newCallbackSink(t)
	cb.status.Store(503)
	s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
		"output_dimension": 256, "max_result_bytes": smallResult, "callback_url": cb.URL})
	v := s.Send(context.Background(), message(inputs(10, "")))
	if v.Outcome != sdk.OutcomeTransient || !strings.HasPrefix(v.Detail, "part 1 of 3: callback") {
		t.Errorf("verdict = %v %q; want TRANSIENT naming part 1", v.Outcome, v.Detail)
	}
	if n := f.hits.Load(); n != 1 {
		t.Errorf("Voyage got %d requests; want 1: no more parts are paid for once a callback fails", n)
	}
}

// TestSender_Send_answerSplit: a result that can be stored but whose answer
// (JSON numbers, encoding_format float) would pass max_result_bytes is
// asked for in several requests and stored as one.
func TestSender_Send_answerSplit(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	// Float on the wire: 64 + 256×25 = 6464 bytes an input, 3 per answer.
	s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
		"output_dimension": 256, "max_result_bytes": smallResult, "encoding_format": "float"})
	v := s.Send(context.Background(), message(inputs(4, "")))
	if v.Outcome != sdk.OutcomeSuccess {
		t.Fatalf("verdict = %v %q", v.Outcome, v.Detail)
	}
	a, b := f.next(t), f.next(t)
	if len(a.body["input"].([]any)) != 3 || len(b.body["input"].([]any)) != 1 {
		t.Errorf("requests of %d and %d inputs; want 3 and 1", len(a.body["input"].([]any)), len(b.body["input"].([]any)))
	}
	if got := f.answered.Load(); got > smallResult {
		t.Errorf("largest answer = %d bytes; want at most %d", got, smallResult)
	}
	r := decodeResult(t, v.Result)
	if len(r.Data) != 4 || r.Data[3].Index != 3 || r.Data[3].Embedding[0] != 0 || r.Usage.TotalTokens != 4*(6/4+1) {
		t.Errorf("result = %d entries, last index %d, usage %d; want 4 merged, usage summed", len(r.Data), r.Data[len(r.Data)-1].Index, r.Usage.TotalTokens)
	}
	if len(v.Result) > smallResult {
		t.Errorf("result is %d bytes; want it within max_result_bytes", len(v.Result))
	}
}

// pythonFloats answers each input with dims float32 values (about ±0.03, a
// unit vector's) written as Voyage's Python server writes JSON numbers
// with encoding_format left out: the float64 repr of the float32, up to 17
// significant digits ("-0.029999999329447746").
func pythonFloats(dims int) func(http.ResponseWriter, voyageRequest) {
	return func(w http.ResponseWriter, r voyageRequest) {
		inputs, _ := r.body["input"].([]any)
		var b strings.Builder
		b.WriteString(`{"object":"list","data":[`)
		for i := range inputs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"object": "embedding", "embedding": [`)
			for j := range dims {
				if j > 0 {
					b.WriteString(", ")
				}
				v := float32((i*7919+j*104729)%2001-1000) / 33333
				b.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 64))
			}
			fmt.Fprintf(&b, `], "index": %d}`, i)
		}
		fmt.Fprintf(&b, `], "model": "voyage-3.5", "usage": {"total_tokens": %d}}`, len(inputs))
		io.WriteString(w, b.String())
	}
}

// TestSender_Send_floatAnswerStoredAsFloat32: with encoding_format float,
// Voyage writes each value as Python's float64 repr of the float32 (up to
// 17 significant digits, 20–23 bytes), and the plugin stored that text as
// it came. The result-size estimate counts the float32's shortest form (18
// bytes with its comma, the README's "Floats are written in their shortest
// exact float32 form"): at the default 4 MiB, the 226 inputs that the plan
// says fit at 1024 dimensions came to 4.9 MB, past what the host stores, so
// the embeddings — paid for — were replaced by a note. Values are now
// written in the float32's shortest form whatever form Voyage used.
func TestSender_Send_floatAnswerStoredAsFloat32(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	f.respond = pythonFloats(1024)
	s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "encoding_format": "float"})
	z := newSizing(params{Model: "voyage-3.5"}, EncodingFloat, wire.MaxResultBytes)
	n := z.fitStored()
	v := s.Send(context.Background(), message(inputs(n, "")))
	if v.Outcome != sdk.OutcomeSuccess {
		t.Fatalf("%d inputs: verdict = %v %q", n, v.Outcome, v.Detail)
	}
	if len(v.Result) > wire.MaxResultBytes {
		t.Errorf("%d inputs at 1024 dimensions: result is %d bytes, past the %d the host stores (the estimate said %d)", n, len(v.Result), wire.MaxResultBytes, z.stored(n))
	}
	r := decodeResult(t, v.Result)
	if len(r.Data) != n || len(r.Data[1].Embedding) != 1024 {
		t.Fatalf("result: %d embeddings, want %d of 1024 values", len(r.Data), n)
	}
	if got, want := float32(r.Data[1].Embedding[3]), float32((1*7919+3*104729)%2001-1000)/33333; got != want {
		t.Errorf("value = %v, want the float32 %v", got, want)
	}
}
