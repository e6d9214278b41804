package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

const testKey = "pa-test-9f8e7d6c5b4a3210"

// voyageRequest is what the fake saw: the raw request and its decoded body.
type voyageRequest struct {
	method, path string
	header       http.Header
	raw          []byte
	body         map[string]any
}

// fakeVoyage reproduces the documented behaviour of POST /v1/embeddings:
// Bearer auth (401 with a detail otherwise), a JSON body with input and
// model, one embedding per input in data[] with its index, usage.total_tokens,
// the embeddings in base64 when encoding_format is "base64".
// respond, when set, answers instead (after the request is recorded).
type fakeVoyage struct {
	*httptest.Server
	got     chan voyageRequest
	hits    atomic.Int64
	respond func(w http.ResponseWriter, r voyageRequest)
	// answered is the largest answer body it sent, in bytes.
	answered atomic.Int64
}

func newFakeVoyage(t *testing.T) *fakeVoyage {
	t.Helper()
	f := &fakeVoyage{got: make(chan voyageRequest, 16)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeVoyage) serve(w http.ResponseWriter, req *http.Request) {
	f.hits.Add(1)
	raw, _ := io.ReadAll(req.Body)
	r := voyageRequest{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	select {
	case f.got <- r:
	default: // a test that sends many requests only counts hits
	}
	if f.respond != nil {
		f.respond(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case req.Header.Get("Authorization") != "Bearer "+testKey:
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"detail":"Provided API key is invalid."}`)
		return
	case req.Method != http.MethodPost || req.URL.Path != "/v1/embeddings":
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"detail":"Not Found"}`)
		return
	}
	var inputs []string
	switch in := r.body["input"].(type) {
	case string:
		inputs = []string{in}
	case []any:
		for _, s := range in {
			inputs = append(inputs, s.(string))
		}
	default:
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"detail":"input must be a string or a list of strings"}`)
		return
	}
	// The dimension asked for, else the model's (params.dimension: the
	// table of Voyage's documented ones).
	model, _ := r.body["model"].(string)
	dims := params{Model: model}.dimension()
	if d, ok := r.body["output_dimension"].(float64); ok {
		dims = int(d)
	}
	dtype, _ := r.body["output_dtype"].(string)
	b64 := r.body["encoding_format"] == "base64"
	resp := map[string]any{"object": "list", "model": r.body["model"]}
	var data []map[string]any
	tokens := 0
	// Answer out of order, as nothing in the docs promises order.
	for i := len(inputs) - 1; i >= 0; i-- {
		data = append(data, map[string]any{"object": "embedding", "embedding": fakeEmbedding(i, dims, dtype, b64), "index": i})
		tokens += len(inputs[i])/4 + 1
	}
	resp["data"] = data
	resp["usage"] = map[string]any{"total_tokens": tokens}
	out, _ := json.Marshal(resp)
	f.answered.Store(max(f.answered.Load(), int64(len(out))))
	w.Write(out)
}

// fakeEmbedding is input i's embedding as Voyage sends it: value j is i +
// j/10 (float) or i + j (integer dtypes; binary packs 8 dimensions a byte),
// as JSON numbers or, with encoding_format base64, the values' little-endian
// bytes in base64 (what numpy's tobytes gives Voyage's client).
func fakeEmbedding(i, dims int, dtype string, b64 bool) any {
	n := dims
	if dtype == "binary" || dtype == "ubinary" {
		n = (dims + 7) / 8
	}
	var raw []byte
	var nums []any
	for j := range n {
		switch dtype {
		case "int8", "binary":
			v := int8(i + j)
			raw, nums = append(raw, byte(v)), append(nums, v)
		case "uint8", "ubinary":
			v := uint8(i + j)
			raw, nums = append(raw, v), append(nums, v)
		default:
			v := float32(i) + float32(j)/10
			raw, nums = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v)), append(nums, v)
		}
	}
	if b64 {
		return base64.StdEncoding.EncodeToString(raw)
	}
	return nums
}

func (f *fakeVoyage) next(t *testing.T) voyageRequest {
	t.Helper()
	select {
	case r := <-f.got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("fake Voyage got no request")
		return voyageRequest{}
	}
}

func configure(t *testing.T, cfg map[string]any) sdk.Sender {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatalf("Configure(%s): %v", raw, err)
	}
	return s
}

func message(payload string) sdk.Message {
	return sdk.Message{
		ID: 7, Channel: "embed", Recipient: "doc-7", Payload: json.RawMessage(payload), Attempt: 1,
		IdempotencyKey: "doc-7-v3", CreatedAt: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC),
	}
}

// result is the notification's result as a test reads it.
type result struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Embedding []float64 `json:"embedding"`
		Index     int       `json:"index"`
	} `json:"data"`
	Usage struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeResult(t *testing.T, raw json.RawMessage) result {
	t.Helper()
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r
}

func TestSender_Send(t *testing.T) {
	t.Parallel()

	t.Run("a string input: exact request, embeddings and usage as the result", func(t *testing.T) {
		t.Parallel()
		f := newFakeVoyage(t)
		s := configure(t, map[string]any{
			"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "input_type": "document",
			"output_dimension": 256, "output_dtype": "float", "truncation": true,
		})
		v := s.Send(context.Background(), message(`{"input":"Seoul is the capital of Korea."}`))
		if v.Outcome != sdk.OutcomeSuccess || v.ProviderStatus != 200 {
			t.Fatalf("verdict = %v %d (%s); want SUCCESS 200", v.Outcome, v.ProviderStatus, v.Detail)
		}
		got := f.next(t)
		if got.method != http.MethodPost || got.path != "/v1/embeddings" {
			t.Errorf("request = %s %s; want POST /v1/embeddings", got.method, got.path)
		}
		for k, want := range map[string]string{
			"Authorization": "Bearer " + testKey, "Content-Type": "application/json", "User-Agent": userAgent,
		} {
			if g := got.header.Get(k); g != want {
				t.Errorf("header %s = %q; want %q", k, g, want)
			}
		}
		wantBody := `{"input":"Seoul is the capital of Korea.","model":"voyage-3.5","input_type":"document","truncation":true,"output_dimension":256,"output_dtype":"float","encoding_format":"base64"}`
		if string(got.raw) != wantBody {
			t.Errorf("body = %s\nwant   %s", got.raw, wantBody)
		}
		r := decodeResult(t, v.Result)
		if r.Model != "voyage-3.5" || len(r.Data) != 1 || len(r.Data[0].Embedding) != 256 || r.Usage.TotalTokens == 0 {
			t.Errorf("result = model %q, %d embeddings, usage %d; want voyage-3.5, 1 of 256 dims, usage > 0",
				r.Model, len(r.Data), r.Usage.TotalTokens)
		}
	})

	t.Run("a list input comes back ordered by index; a payload overrides the channel", func(t *testing.T) {
		t.Parallel()
		f := newFakeVoyage(t)
		s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL + "/", "model": "voyage-3.5", "input_type": "document"})
		v := s.Send(context.Background(), message(
			`{"input":["a","b","c"],"model":"voyage-code-3","input_type":"query","truncation":false,"output_dtype":"int8"}`))
		if v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("outcome = %v (%s)", v.Outcome, v.Detail)
		}
		got := f.next(t)
		want := map[string]any{"input": []any{"a", "b", "c"}, "model": "voyage-code-3", "input_type": "query",
			"truncation": false, "output_dtype": "int8", "encoding_format": "base64"}
		if g, w := fmt.Sprint(got.body), fmt.Sprint(want); g != w {
			t.Errorf("body = %s; want %s", g, w)
		}
		r := decodeResult(t, v.Result)
		for i, d := range r.Data {
			if d.Index != i || d.Embedding[0] != float64(i) {
				t.Errorf("result data[%d] = index %d, embedding %v; want index %d", i, d.Index, d.Embedding, i)
			}
		}
	})

	t.Run("nothing optional set: input, model and the base64 encoding are sent", func(t *testing.T) {
		t.Parallel()
		f := newFakeVoyage(t)
		s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-4"})
		s.Send(context.Background(), message(`{"input":["x"]}`))
		if got := f.next(t); string(got.raw) != `{"input":["x"],"model":"voyage-4","encoding_format":"base64"}` {
			t.Errorf("body = %s; want only input, model and encoding_format", got.raw)
		}
	})

	t.Run("encoding_format float: only input and model are sent", func(t *testing.T) {
		t.Parallel()
		f := newFakeVoyage(t)
		s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-4", "encoding_format": "float"})
		v := s.Send(context.Background(), message(`{"input":["x"]}`))
		if got := f.next(t); string(got.raw) != `{"input":["x"],"model":"voyage-4"}` {
			t.Errorf("body = %s; want only input and model", got.raw)
		}
		if r := decodeResult(t, v.Result); len(r.Data) != 1 || len(r.Data[0].Embedding) != 1024 || r.Data[0].Embedding[1] != 0.1 {
			t.Errorf("result = %.300s; want Voyage's numbers, voyage-4's 1024 of them", v.Result)
		}
	})
}

func TestSender_Send_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		want       sdk.Outcome
		retryAfter time.Duration
		inDetail   string
	}{
		{name: "429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "3"},
			body: `{"detail":"You have exceeded your rate limit."}`, want: sdk.OutcomeTransient, retryAfter: 3 * time.Second,
			inDetail: "429 Too Many Requests: You have exceeded your rate limit."},
		{name: "429 without Retry-After", status: 429, body: `{"detail":"slow down"}`, want: sdk.OutcomeTransient},
		{name: "500", status: 500, body: `{"detail":"Internal Server Error"}`, want: sdk.OutcomeTransient, inDetail: "500"},
		{name: "502", status: 502, body: "<html>bad gateway</html>", want: sdk.OutcomeTransient, inDetail: "bad gateway"},
		{name: "503 with Retry-After", status: 503, header: map[string]string{"Retry-After": "10"},
			want: sdk.OutcomeTransient, retryAfter: 10 * time.Second},
		{name: "400 with detail", status: 400,
			body: `{"detail":"Request to model 'voyage-3.5' failed. The max allowed tokens per submitted batch is 320000."}`,
			want: sdk.OutcomePermanent, inDetail: "400 Bad Request: Request to model 'voyage-3.5' failed. The max allowed tokens per submitted batch is 320000."},
		{name: "400 with a validation list", status: 400, body: `{"detail":[{"loc":["body","input"],"msg":"field required"}]}`,
			want: sdk.OutcomePermanent, inDetail: "field required"},
		{name: "401 with detail", status: 401, body: `{"detail":"Provided API key is invalid."}`,
			want: sdk.OutcomePermanent, inDetail: "401 Unauthorized: Provided API key is invalid."},
		{name: "403 with detail", status: 403, body: `{"detail":"Forbidden: your IP address is not allowed."}`,
			want: sdk.OutcomePermanent, inDetail: "403 Forbidden: Forbidden: your IP address is not allowed."},
		{name: "error with no body", status: 403, want: sdk.OutcomePermanent, inDetail: "(no body)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeVoyage(t)
			f.respond = func(w http.ResponseWriter, _ voyageRequest) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}
			s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5"})
			v := s.Send(context.Background(), message(`{"input":"hello"}`))
			if v.Outcome != tt.want || v.ProviderStatus != tt.status || v.RetryAfter != tt.retryAfter {
				t.Errorf("verdict = %v status %d retry %v; want %v status %d retry %v",
					v.Outcome, v.ProviderStatus, v.RetryAfter, tt.want, tt.status, tt.retryAfter)
			}
			if !strings.Contains(v.Detail, tt.inDetail) {
				t.Errorf("detail = %q; want it to contain %q", v.Detail, tt.inDetail)
			}
			if v.Result != nil {
				t.Errorf("result = %s; want none on failure", v.Result)
			}
		})
	}
}

func TestSender_Send_refusedBeforeSending(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3-large"})
	small := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "max_batch_tokens": 100})

	many, _ := json.Marshal(map[string]any{"input": make1001()})
	// voyage-3-large takes 120K tokens: 121K × 6 bytes is over on any estimate.
	huge, _ := json.Marshal(map[string]any{"input": []string{strings.Repeat("word ", 121_000*6/5)}})
	tests := []struct {
		name     string
		sender   sdk.Sender
		payload  string
		inDetail string
	}{
		{"1001 inputs", s, string(many), "1001 texts; Voyage takes at most 1000"},
		{"over the model's token limit", s, string(huge), "voyage-3-large takes at most 120000"},
		{"over max_batch_tokens", small, `{"input":"` + strings.Repeat("a", 601) + `"}`, "takes at most 100"},
		{"the payload's model sets the limit", s, `{"input":"x","model":"voyage-3-large","output_dimension":100}`, "output_dimension"},
		{"not JSON", s, `{"input":`, "payload"},
		{"empty payload", s, ``, "payload: is empty"},
		{"no input", s, `{"model":"voyage-3.5"}`, "no input"},
		{"input null", s, `{"input":null}`, "no input"},
		{"input a number", s, `{"input":5}`, "string or a list of strings"},
		{"input a list of numbers", s, `{"input":[1,2]}`, "string or a list of strings"},
		{"empty list", s, `{"input":[]}`, "empty list"},
		{"empty string", s, `{"input":""}`, "input is an empty string"},
		{"an empty string in the list", s, `{"input":["a",""]}`, "input[1] is an empty string"},
		{"unknown key", s, `{"input":"a","dimensions":256}`, `unknown field "dimensions"`},
		{"bad input_type", s, `{"input":"a","input_type":"passage"}`, "input_type"},
		{"bad output_dtype", s, `{"input":"a","output_dtype":"float16"}`, "output_dtype"},
		{"truncation not a boolean", s, `{"input":"a","truncation":"no"}`, "truncation"},
		{"trailing data", s, `{"input":"a"} {}`, "after the JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.sender.Send(context.Background(), message(tt.payload))
			if v.Outcome != sdk.OutcomePermanent {
				t.Errorf("outcome = %v (%s); want PERMANENT", v.Outcome, v.Detail)
			}
			if !strings.Contains(v.Detail, tt.inDetail) {
				t.Errorf("detail = %q; want it to contain %q", v.Detail, tt.inDetail)
			}
		})
	}
	if n := f.hits.Load(); n != 0 {
		t.Errorf("Voyage got %d requests; want none: every payload above is refused before sending", n)
	}

	t.Run("just under the limits is sent", func(t *testing.T) {
		texts := make1001()[:MaxInputs]
		// binary: 1000 results of 128 bytes fit in a stored result.
		body, _ := json.Marshal(map[string]any{"input": texts, "output_dtype": "binary"})
		if v := s.Send(context.Background(), message(string(body))); v.Outcome != sdk.OutcomeSuccess {
			t.Errorf("1000 inputs: outcome = %v (%s); want SUCCESS", v.Outcome, v.Detail)
		}
		if v := small.Send(context.Background(), message(`{"input":"`+strings.Repeat("a", 600)+`"}`)); v.Outcome != sdk.OutcomeSuccess {
			t.Errorf("600 bytes under max_batch_tokens 100: outcome = %v (%s); want SUCCESS", v.Outcome, v.Detail)
		}
	})
}

func make1001() []string {
	texts := make([]string, MaxInputs+1)
	for i := range texts {
		texts[i] = fmt.Sprintf("text %d", i)
	}
	return texts
}

// embeddings answers with one embedding per argument, in order.
func embeddings(vectors ...string) func(http.ResponseWriter, voyageRequest) {
	return func(w http.ResponseWriter, _ voyageRequest) {
		io.WriteString(w, `{"object":"list","data":[`)
		for i, v := range vectors {
			if i > 0 {
				io.WriteString(w, ",")
			}
			fmt.Fprintf(w, `{"object":"embedding","embedding":%s,"index":%d}`, v, i)
		}
		io.WriteString(w, `],"model":"voyage-3.5","usage":{"total_tokens":2}}`)
	}
}

func TestSender_Send_badAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		respond  func(w http.ResponseWriter, r voyageRequest)
		config   map[string]any
		want     sdk.Outcome
		inDetail string
	}{
		{name: "garbage 200", want: sdk.OutcomeTransient, inDetail: "unusable body",
			respond: func(w http.ResponseWriter, _ voyageRequest) { io.WriteString(w, "<html>proxy login</html>") }},
		{name: "fewer embeddings than inputs", want: sdk.OutcomeTransient, inDetail: "1 embeddings for 2 inputs",
			respond: func(w http.ResponseWriter, _ voyageRequest) {
				io.WriteString(w, `{"object":"list","data":[{"embedding":[1],"index":0}],"model":"m","usage":{"total_tokens":1}}`)
			}},
		{name: "a repeated index", want: sdk.OutcomeTransient, inDetail: "index 0",
			respond: func(w http.ResponseWriter, _ voyageRequest) {
				io.WriteString(w, `{"data":[{"embedding":[1],"index":0},{"embedding":[2],"index":0}]}`)
			}},
		{name: "an embedding that is not a vector", want: sdk.OutcomeTransient, inDetail: "not a vector",
			respond: func(w http.ResponseWriter, _ voyageRequest) {
				io.WriteString(w, `{"data":[{"embedding":{},"index":0},{"embedding":[2],"index":1}]}`)
			}},
		// planRequests sized the request so that Voyage's answer fits: a
		// longer one is not Voyage's, and was made final by its size alone
		// (while the same page, shorter, was TRANSIENT).
		{name: "over max_result_bytes", want: sdk.OutcomeTransient, inDetail: "max_result_bytes (20000)",
			config: map[string]any{"max_result_bytes": 20000, "output_dimension": 256},
			respond: func(w http.ResponseWriter, _ voyageRequest) {
				fmt.Fprintf(w, `{"data":[{"embedding":[%s1],"index":0}]}`, strings.Repeat("0.123456789,", 2000))
			}},
		{name: "a 10 MB page past max_result_bytes", want: sdk.OutcomeTransient, inDetail: "over max_result_bytes (4194304)",
			respond: func(w http.ResponseWriter, _ voyageRequest) {
				w.Header().Set("Content-Type", "text/html")
				chunk := []byte(strings.Repeat("<p>proxy</p>", 1<<12))
				for range 200 {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}},
		// Embeddings that are not lists of finite numbers were stored as
		// the result, SUCCESS: the base64 path refused NaN and Inf, the
		// JSON-number path took whatever came.
		{name: "an embedding of strings", want: sdk.OutcomeTransient, inDetail: "embedding 0: value 0 is a string",
			respond: embeddings(`["a","b"]`, `[1,2]`)},
		{name: "an embedding of nulls", want: sdk.OutcomeTransient, inDetail: "value 0 is null",
			respond: embeddings(`[1,2]`, `[null,null]`)},
		{name: "an embedding of objects", want: sdk.OutcomeTransient, inDetail: "value 0 is an array or object",
			respond: embeddings(`[{},{}]`, `[1,2]`)},
		{name: "nested vectors", want: sdk.OutcomeTransient, inDetail: "value 0 is an array or object",
			respond: embeddings(`[[1],[2]]`, `[1,2]`)},
		{name: "numbers past float64", want: sdk.OutcomeTransient, inDetail: "value 0 (1e999) is not a finite number",
			respond: embeddings(`[1e999,-1e999]`, `[1,2]`)},
		{name: "an empty vector", want: sdk.OutcomeTransient, inDetail: "no values",
			respond: embeddings(`[1,2]`, `[]`)},
		{name: "an empty base64 vector", want: sdk.OutcomeTransient, inDetail: "no values",
			respond: embeddings(`""`, `[1,2]`)},
		{name: "vectors of different lengths", want: sdk.OutcomeTransient, inDetail: "embedding 1 has 1 values, embedding 0 has 2",
			respond: embeddings(`[1,2]`, `[1]`)},
		{name: "an unfollowed redirect", want: sdk.OutcomePermanent, inDetail: "307",
			respond: func(w http.ResponseWriter, _ voyageRequest) {
				w.Header().Set("Location", "/v2/embeddings")
				w.WriteHeader(http.StatusTemporaryRedirect)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeVoyage(t)
			f.respond = tt.respond
			cfg := map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5"}
			for k, v := range tt.config {
				cfg[k] = v
			}
			v := configure(t, cfg).Send(context.Background(), message(`{"input":["a","b"]}`))
			if v.Outcome != tt.want || !strings.Contains(v.Detail, tt.inDetail) {
				t.Errorf("verdict = %v %q; want %v containing %q", v.Outcome, v.Detail, tt.want, tt.inDetail)
			}
		})
	}

	t.Run("a 101 Switching Protocols ends at the timeout, transient", func(t *testing.T) {
		// net/http hands a 101's connection back as the body, and the
		// request's context no longer covers it: the error detail's read
		// waited for the peer to close, past any timeout.
		t.Parallel()
		u := sdktest.RawServer(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
		// 3 s: long enough for the 101 to arrive on a busy machine (at
		// 300 ms, beside two CPU burners, the request itself ran out first:
		// rehearsal 63), far under the 30 s an uncut read would take.
		s := configure(t, map[string]any{"api_key": testKey, "base_url": strings.TrimSuffix(u, "/send"), "model": "voyage-3.5", "timeout": "3s"})
		got := make(chan sdk.Verdict, 1)
		go func() { got <- s.Send(context.Background(), message(`{"input":"a"}`)) }()
		select {
		case v := <-got:
			if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "101") {
				t.Errorf("verdict = %v (%s); want TRANSIENT naming the 101", v.Outcome, v.Detail)
			}
		case <-time.After(30 * time.Second): // uncut, it waits for the peer
			t.Error("Send still running 30 s after its 3 s timeout: the 101's body is read without a deadline")
		}
	})

	t.Run("a hanging Voyage times out as transient", func(t *testing.T) {
		t.Parallel()
		f := newFakeVoyage(t)
		release := make(chan struct{})
		defer close(release)
		f.respond = func(w http.ResponseWriter, _ voyageRequest) { <-release }
		s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "timeout": "100ms"})
		start := time.Now()
		v := s.Send(context.Background(), message(`{"input":"a"}`))
		if v.Outcome != sdk.OutcomeTransient || time.Since(start) > 10*time.Second { // uncut, it would hang
			t.Errorf("verdict = %v (%s) after %v; want TRANSIENT at the 100ms timeout", v.Outcome, v.Detail, time.Since(start))
		}
	})

	t.Run("Voyage unreachable is transient", func(t *testing.T) {
		t.Parallel()
		f := newFakeVoyage(t)
		url := f.URL
		f.Close()
		v := configure(t, map[string]any{"api_key": testKey, "base_url": url, "model": "voyage-3.5"}).
			Send(context.Background(), message(`{"input":"a"}`))
		if v.Outcome != sdk.OutcomeTransient {
			t.Errorf("outcome = %v (%s); want TRANSIENT", v.Outcome, v.Detail)
		}
	})
}

func TestSender_Send_apiKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	f := newFakeVoyage(t)
	// A hostile or buggy answer that echoes the Authorization header.
	f.respond = func(w http.ResponseWriter, r voyageRequest) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"detail":"bad header %s"}`, r.header.Get("Authorization"))
	}
	raw, _ := json.Marshal(map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5"})
	s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	v := s.Send(context.Background(), message(`{"input":"a"}`))
	if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "[redacted]") {
		t.Errorf("verdict = %v %q; want PERMANENT with the key redacted", v.Outcome, v.Detail)
	}
	for what, text := range map[string]string{"detail": v.Detail, "logs": logs.String()} {
		if strings.Contains(text, testKey) {
			t.Errorf("%s contain the api_key: %q", what, text)
		}
	}
}

// callbackSink records what the callback URL receives.
type callbackSink struct {
	*httptest.Server
	got    chan voyageRequest
	status atomic.Int64
}

func newCallbackSink(t *testing.T) *callbackSink {
	t.Helper()
	c := &callbackSink{got: make(chan voyageRequest, 8)}
	c.status.Store(http.StatusOK)
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		c.got <- voyageRequest{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), raw: raw}
		w.WriteHeader(int(c.status.Load()))
	}))
	t.Cleanup(c.Close)
	return c
}

func TestSender_Send_callback(t *testing.T) {
	t.Parallel()

	t.Run("the result is POSTed to callback_url", func(t *testing.T) {
		t.Parallel()
		f, cb := newFakeVoyage(t), newCallbackSink(t)
		s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
			"callback_url": cb.URL + "/embedded?k=v", "callback_headers": map[string]string{"Authorization": "Bearer cb-token"}})
		v := s.Send(context.Background(), message(`{"input":["a","b"]}`))
		if v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("outcome = %v (%s)", v.Outcome, v.Detail)
		}
		got := <-cb.got
		if got.method != http.MethodPost || got.path != "/embedded" {
			t.Errorf("callback = %s %s; want POST /embedded", got.method, got.path)
		}
		for k, want := range map[string]string{"Content-Type": "application/json", "Idempotency-Key": "doc-7-v3",
			"Authorization": "Bearer cb-token", "User-Agent": userAgent} {
			if g := got.header.Get(k); g != want {
				t.Errorf("callback header %s = %q; want %q", k, g, want)
			}
		}
		var body struct {
			ID             int64           `json:"id"`
			Channel        string          `json:"channel"`
			Recipient      string          `json:"recipient"`
			IdempotencyKey string          `json:"idempotency_key"`
			Attempt        int             `json:"attempt"`
			CreatedAt      time.Time       `json:"created_at"`
			Result         json.RawMessage `json:"result"`
		}
		dec := json.NewDecoder(bytes.NewReader(got.raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			t.Fatalf("callback body %s: %v", got.raw, err)
		}
		if body.ID != 7 || body.Channel != "embed" || body.Recipient != "doc-7" || body.IdempotencyKey != "doc-7-v3" ||
			body.Attempt != 1 || body.CreatedAt.IsZero() || !bytes.Equal(body.Result, v.Result) {
			t.Errorf("callback body = %s; want the notification's fields and result %s", got.raw, v.Result)
		}
	})

	t.Run("a failing callback fails the send, with the result kept", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			status int
			want   sdk.Outcome
		}{{503, sdk.OutcomeTransient}, {429, sdk.OutcomeTransient}, {400, sdk.OutcomePermanent}, {404, sdk.OutcomePermanent}} {
			f, cb := newFakeVoyage(t), newCallbackSink(t)
			cb.status.Store(int64(tt.status))
			s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
				"callback_url": cb.URL + "/cb?token=cb-secret"})
			v := s.Send(context.Background(), message(`{"input":"a"}`))
			if v.Outcome != tt.want || v.ProviderStatus != tt.status || !strings.HasPrefix(v.Detail, "callback ") {
				t.Errorf("callback %d: verdict = %v %d %q; want %v %d with a detail naming the callback",
					tt.status, v.Outcome, v.ProviderStatus, v.Detail, tt.want, tt.status)
			}
			if strings.Contains(v.Detail, "cb-secret") {
				t.Errorf("callback %d: detail %q echoes the callback URL's query", tt.status, v.Detail)
			}
			if len(decodeResult(t, v.Result).Data) != 1 {
				t.Errorf("callback %d: result = %s; want the embeddings kept", tt.status, v.Result)
			}
		}
	})

	t.Run("no callback when Voyage fails", func(t *testing.T) {
		t.Parallel()
		f, cb := newFakeVoyage(t), newCallbackSink(t)
		s := configure(t, map[string]any{"api_key": "pa-wrong-key", "base_url": f.URL, "model": "voyage-3.5", "callback_url": cb.URL})
		if v := s.Send(context.Background(), message(`{"input":"a"}`)); v.Outcome != sdk.OutcomePermanent {
			t.Errorf("outcome = %v (%s); want PERMANENT (401)", v.Outcome, v.Detail)
		}
		select {
		case got := <-cb.got:
			t.Errorf("callback got %s; want nothing", got.raw)
		default:
		}
	})
}

func TestProvider_Configure_errors(t *testing.T) {
	t.Parallel()
	base := `"api_key":"` + testKey + `","model":"voyage-3.5"`
	tests := []struct {
		name, config, wantKey string
	}{
		{"no api_key", `{"model":"voyage-3.5"}`, "api_key"},
		{"no model", `{"api_key":"k"}`, "model"},
		{"base_url not http", `{` + base + `,"base_url":"api.voyageai.com"}`, "base_url"},
		{"unknown key", `{` + base + `,"dimensions":256}`, "dimensions"},
		{"bad input_type", `{` + base + `,"input_type":"passage"}`, "input_type"},
		{"bad output_dimension", `{` + base + `,"output_dimension":300}`, "output_dimension"},
		{"bad output_dtype", `{` + base + `,"output_dtype":"fp16"}`, "output_dtype"},
		{"truncation a string", `{` + base + `,"truncation":"yes"}`, "truncation"},
		{"timeout not a duration", `{` + base + `,"timeout":"30"}`, "timeout"},
		{"negative max_batch_tokens", `{` + base + `,"max_batch_tokens":-1}`, "max_batch_tokens"},
		{"negative max_result_bytes", `{` + base + `,"max_result_bytes":-1}`, "max_result_bytes"},
		{"callback_url not a URL", `{` + base + `,"callback_url":"mailto:x@example.com"}`, "callback_url"},
		// What url.Parse takes and no request can go to as written.
		{"base_url port past 65535", `{` + base + `,"base_url":"http://127.0.0.1:99999"}`, "base_url has port 99999"},
		{"base_url empty port", `{` + base + `,"base_url":"http://127.0.0.1:/"}`, "base_url has an empty port"},
		{"base_url port without a host", `{` + base + `,"base_url":"http://:8080"}`, "base_url has no host"},
		{"callback_url port 0", `{` + base + `,"callback_url":"http://127.0.0.1:0/cb"}`, "callback_url has port 0"},
		{"callback_url space in the query", `{` + base + `,"callback_url":"http://127.0.0.1/cb?name=my hook"}`, "callback_url has a space in its query"},
		{"callback_headers without callback_url", `{` + base + `,"callback_headers":{"A":"b"}}`, "callback_headers"},
		{"callback_timeout bad", `{` + base + `,"callback_url":"http://127.0.0.1/","callback_timeout":"0s"}`, "callback_timeout"},
		{"reserved callback header", `{` + base + `,"callback_url":"http://127.0.0.1/","callback_headers":{"content-type":"x"}}`, "callback_headers.content-type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: json.RawMessage(tt.config)})
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("Configure(%s) error = %v; want one naming %q", tt.config, err, tt.wantKey)
			}
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Errorf("Configure error %q contains the api_key", err)
			}
		})
	}
}

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		texts []string
		want  int
	}{
		{[]string{"a"}, 1},
		{[]string{"abcdef"}, 1},
		{[]string{"abcdefg"}, 2},
		{[]string{"a", "b", "c"}, 3},
		{[]string{"안녕하세요"}, 3}, // 15 bytes of UTF-8
	}
	for _, tt := range tests {
		if got := estimateTokens(tt.texts); got != tt.want {
			t.Errorf("estimateTokens(%q) = %d; want %d", tt.texts, got, tt.want)
		}
	}
	if got := tokenLimit("voyage-3.5-lite"); got != 1_000_000 {
		t.Errorf("tokenLimit(voyage-3.5-lite) = %d; want 1000000", got)
	}
	if got := tokenLimit("voyage-99-experimental"); got != defaultTokenLimit {
		t.Errorf("tokenLimit(unknown) = %d; want the smallest documented cap %d", got, defaultTokenLimit)
	}
}

// answerDims answers each input with a dims-dimension embedding of dtype,
// whatever the request asked for.
func answerDims(dims int) func(http.ResponseWriter, voyageRequest) {
	return func(w http.ResponseWriter, r voyageRequest) {
		inputs, _ := r.body["input"].([]any)
		dtype, _ := r.body["output_dtype"].(string)
		data := make([]map[string]any, len(inputs))
		for i := range inputs {
			data[i] = map[string]any{"object": "embedding", "embedding": fakeEmbedding(i, dims, dtype, r.body["encoding_format"] == "base64"), "index": i}
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": r.body["model"], "usage": map[string]any{"total_tokens": len(inputs)}})
	}
}

// TestSender_Send_wrongDimension: Voyage (or what answers for it) sends
// embeddings of another dimension than the request asked for (the
// output_dimension, or the model's documented one). They were stored as
// the result, SENT: vectors a store of the asked dimension refuses, and
// (300 inputs at 256 dimensions answered at 2048) 8× the values the
// result's size was planned for, so the plan's bound on it no longer held
// (past 4 MiB the host replaces a result by a note). An answer of the wrong
// dimension is now unusable, retried, as one of the wrong count. A model
// not in the plugin's table, with no output_dimension, is not checked.
func TestSender_Send_wrongDimension(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		config map[string]any
		answer int
		n      int
		want   sdk.Outcome
	}{
		{"256 asked, 2048 answered", map[string]any{"output_dimension": 256}, 2048, 300, sdk.OutcomeTransient},
		{"256 asked, 255 answered", map[string]any{"output_dimension": 256}, 255, 2, sdk.OutcomeTransient},
		{"the model's 1024, 512 answered", nil, 512, 2, sdk.OutcomeTransient},
		{"binary at 1024 (128 bytes), 2048 answered", map[string]any{"output_dtype": "binary"}, 2048, 2, sdk.OutcomeTransient},
		{"the model's 1024, float on the wire, 1536 answered", map[string]any{"encoding_format": "float"}, 1536, 2, sdk.OutcomeTransient},
		{"the model's 1024 answered", nil, 1024, 2, sdk.OutcomeSuccess},
		{"a model not in the table answers 3072", map[string]any{"model": "voyage-next"}, 3072, 2, sdk.OutcomeSuccess},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeVoyage(t)
			f.respond = answerDims(tt.answer)
			cfg := map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5"}
			for k, v := range tt.config {
				cfg[k] = v
			}
			v := configure(t, cfg).Send(context.Background(), message(inputs(tt.n, "")))
			if v.Outcome != tt.want {
				t.Errorf("verdict = %v %q (result %d bytes); want %v", v.Outcome, v.Detail, len(v.Result), tt.want)
			}
			if tt.want == sdk.OutcomeTransient && !strings.Contains(v.Detail, "values") {
				t.Errorf("detail = %q, want it to name the values it has and the ones asked for", v.Detail)
			}
		})
	}
}

// TestSender_Send_answerFieldTypes: a 2xx whose embeddings are right but
// whose other fields have another JSON type than documented (total_tokens
// quoted, fractional or past int64; model or object a number). json.Unmarshal
// failed for the whole answer: TRANSIENT "unusable body", so the same
// embeddings were paid for again on every retry and then dead-lettered.
// Those fields are read for what they hold (a count in any numeric form, 0
// otherwise; a name as its text); only the embeddings decide.
func TestSender_Send_answerFieldTypes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, tail string
		tokens     int
	}{
		{"total_tokens quoted", `"model":"voyage-3.5","usage":{"total_tokens":"9"}`, 9},
		{"total_tokens 9.0", `"model":"voyage-3.5","usage":{"total_tokens":9.0}`, 9},
		{"total_tokens past int64", `"model":"voyage-3.5","usage":{"total_tokens":1e30}`, 0},
		{"usage a list", `"model":"voyage-3.5","usage":[9]`, 0},
		{"model a number", `"model":35,"usage":{"total_tokens":9}`, 9},
		{"object an object", `"object":{"kind":"list"},"model":"voyage-3.5","usage":{"total_tokens":9}`, 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeVoyage(t)
			f.respond = func(w http.ResponseWriter, _ voyageRequest) {
				fmt.Fprintf(w, `{"data":[{"object":"embedding","embedding":%s,"index":0}],%s}`, string(mustJSON(fakeEmbedding(0, 256, "", false))), tt.tail)
			}
			s := configure(t, map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "output_dimension": 256})
			v := s.Send(context.Background(), message(`{"input":"a"}`))
			if v.Outcome != sdk.OutcomeSuccess {
				t.Fatalf("verdict = %v %q; want SUCCESS (the embeddings are right)", v.Outcome, v.Detail)
			}
			if r := decodeResult(t, v.Result); len(r.Data) != 1 || len(r.Data[0].Embedding) != 256 || r.Usage.TotalTokens != tt.tokens {
				t.Errorf("result: %d embeddings, usage %d; want 1 of 256 values, usage %d", len(r.Data), r.Usage.TotalTokens, tt.tokens)
			}
			if f.hits.Load() != 1 {
				t.Errorf("%d requests, want 1", f.hits.Load())
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
