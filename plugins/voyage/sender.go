package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// sender embeds one channel's notifications. Immutable after Configure.
type sender struct {
	client        *http.Client
	endpoint      string
	authorization string
	// secrets knows the channel's credentials (api_key, user info and query
	// values of base_url and callback_url, callback header values), to scrub
	// them from anything reported: an answer may echo them.
	secrets        *sdk.Redactor
	defaults       params
	encoding       string // EncodingBase64 or EncodingFloat
	timeout        time.Duration
	maxBatchTokens int
	maxResultBytes int64
	pace           *pacer    // shared by the channel's senders
	callback       *callback // nil when the channel has no callback_url
}

// callback is where results are POSTed after a successful embedding.
type callback struct {
	url     *url.URL
	headers http.Header
	timeout time.Duration
	secrets *sdk.Redactor // the sender's
}

// embedResponse is Voyage's answer to POST /v1/embeddings, and the result.
// Only data decides whether the answer is usable: the other fields are read
// for what they hold (text, count), so one of another JSON type than
// documented does not throw away embeddings that were paid for (a quoted
// total_tokens made the answer unusable, retried and paid for again).
type embedResponse struct {
	Object text             `json:"object"`
	Data   []embeddingEntry `json:"data"`
	Model  text             `json:"model"`
	Usage  usage            `json:"usage"`
}

type embeddingEntry struct {
	Object    text            `json:"object,omitempty"`
	Embedding json.RawMessage `json:"embedding"`
	Index     int             `json:"index"`
}

type usage struct {
	TotalTokens count `json:"total_tokens"`
}

// UnmarshalJSON reads usage from an object; anything else is no usage.
func (u *usage) UnmarshalJSON(b []byte) error {
	var o struct {
		TotalTokens count `json:"total_tokens"`
	}
	if json.Unmarshal(b, &o) != nil {
		o.TotalTokens = 0
	}
	u.TotalTokens = o.TotalTokens
	return nil
}

// text is a string field of an answer: a JSON string as itself, anything
// else as its JSON text (null as ""). It never fails the answer.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	switch {
	case json.Unmarshal(b, &s) == nil:
	case string(b) == "null":
	default:
		s = string(b)
	}
	*t = text(s)
	return nil
}

// count is a count field of an answer (total_tokens): a whole number in any
// JSON form (9, 9.0, "9") from 0 to 2^53; anything else is 0. It never
// fails the answer.
type count int

func (c *count) UnmarshalJSON(b []byte) error {
	*c = 0
	n := json.Number(b)
	var s string
	if json.Unmarshal(b, &s) == nil {
		n = json.Number(strings.TrimSpace(s))
	}
	if f, err := n.Float64(); err == nil && f == math.Trunc(f) && f >= 0 && f <= 1<<53 {
		*c = count(f)
	}
	return nil
}

// errorResponse is Voyage's error body.
type errorResponse struct {
	Detail any `json:"detail"`
}

// Send embeds m's input and returns the embeddings as the result. The
// inputs go in as few requests as the answer size allows; when the result
// could not be stored, they go to the callback in parts (planRequests).
func (s *sender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	r, err := parseRequest(m.Payload, s.defaults, s.maxBatchTokens)
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("notification %d: %v", m.ID, err))
	}
	p, err := planRequests(r, newSizing(r.params, s.encoding, s.maxResultBytes), s.callback != nil)
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("notification %d: %v", m.ID, err))
	}
	if p.parts {
		return s.sendParts(ctx, &m, r, p.chunk)
	}

	var all *embedResponse
	var v sdk.Verdict
	for from := 0; from < len(r.texts); from += p.chunk {
		var got *embedResponse
		if got, v = s.embed(ctx, r, from, min(from+p.chunk, len(r.texts))); v.Outcome != sdk.OutcomeSuccess {
			return v
		}
		if all == nil {
			all = got
		} else {
			all.Data = append(all.Data, got.Data...)
			all.Usage.TotalTokens += got.Usage.TotalTokens
		}
	}
	result, err := json.Marshal(all)
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("voyage: encode result: %v", err))
	}
	v = v.WithResult(result)
	if s.callback != nil {
		if cv := s.callback.post(ctx, s.client, &m, result, nil); cv.Outcome != sdk.OutcomeSuccess {
			return cv.WithResult(result)
		}
	}
	return v
}

// part says which piece of a notification's embeddings a callback carries.
type part struct {
	Part   int `json:"part"`   // from 1
	Parts  int `json:"parts"`  // how many the notification has
	Offset int `json:"offset"` // the input index of this part's first embedding
}

// partsSummary is the stored result when the embeddings went to the
// callback in parts.
type partsSummary struct {
	Object string `json:"object"` // "parts"
	Parts  int    `json:"parts"`
	Inputs int    `json:"inputs"`
	Model  string `json:"model"`
	Usage  usage  `json:"usage"`
}

// sendParts embeds r in requests of chunk inputs and POSTs each answer to
// the callback before the next request, so a failing callback stops the
// spending. A retry starts again from the first part, under the same
// per-part idempotency keys.
func (s *sender) sendParts(ctx context.Context, m *sdk.Message, r *request, chunk int) sdk.Verdict {
	parts := (len(r.texts) + chunk - 1) / chunk
	sum := partsSummary{Object: "parts", Parts: parts, Inputs: len(r.texts)}
	var v sdk.Verdict
	for k := range parts {
		from := k * chunk
		var got *embedResponse
		if got, v = s.embed(ctx, r, from, min(from+chunk, len(r.texts))); v.Outcome != sdk.OutcomeSuccess {
			return v
		}
		sum.Model = string(got.Model)
		sum.Usage.TotalTokens += got.Usage.TotalTokens
		result, err := json.Marshal(got)
		if err != nil {
			return sdk.Permanent(fmt.Sprintf("voyage: encode result: %v", err))
		}
		if cv := s.callback.post(ctx, s.client, m, result, &part{Part: k + 1, Parts: parts, Offset: from}); cv.Outcome != sdk.OutcomeSuccess {
			cv.Detail = fmt.Sprintf("part %d of %d: %s", k+1, parts, cv.Detail)
			return cv
		}
	}
	summary, err := json.Marshal(sum)
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("voyage: encode result: %v", err))
	}
	return v.WithResult(summary)
}

// embed sends r's inputs [from, to) to Voyage once the channel's pace
// allows, and returns the answer with its embeddings as JSON numbers and
// their indexes counted in r's inputs.
func (s *sender) embed(ctx context.Context, r *request, from, to int) (*embedResponse, sdk.Verdict) {
	tokens := estimateTokens(r.texts[from:to])
	if err := s.pace.wait(ctx, tokens); err != nil {
		var paced *errPaced
		if errors.As(err, &paced) {
			return nil, sdk.Transient("voyage: " + err.Error()).WithRetryAfter(min(paced.delay, sdk.MaxRetryAfter))
		}
		return nil, sdk.Transient(fmt.Sprintf("voyage: waiting for the channel's rate limit: %v", err))
	}
	body, err := r.body(from, to, s.wireEncoding())
	if err != nil {
		return nil, sdk.Permanent(fmt.Sprintf("voyage: %v", err))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, sdk.Permanent(fmt.Sprintf("voyage: build request: %v", err))
	}
	req.Header.Set("Authorization", s.authorization)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)

	resp, err := s.client.Do(req)
	if err != nil {
		v := sdk.ClassifyHTTP(nil, err)
		v.Detail = s.scrub("voyage: " + oneLine(v.Detail, 1024))
		return nil, v
	}
	defer resp.Body.Close()
	// Every read of the body ends at the deadline, whatever the body is (a
	// 101's is the connection itself, which the context does not cover).
	respBody := resp.Body // ClassifyHTTP may replace resp.Body
	defer context.AfterFunc(ctx, func() { _ = respBody.Close() })()
	v := sdk.ClassifyHTTP(resp, nil)
	if v.Outcome != sdk.OutcomeSuccess {
		// Voyage says why in {"detail": …}; that is what the operator needs.
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		v.Detail = s.scrub(fmt.Sprintf("voyage: HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), errorDetail(raw)))
		return nil, v
	}
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, s.maxResultBytes+1))
	switch {
	case readErr != nil:
		// The answer was cut off: worth another try.
		return nil, sdk.Transient(s.scrub(fmt.Sprintf("voyage: read response: %v", readErr))).WithStatus(resp.StatusCode)
	case int64(len(raw)) > s.maxResultBytes:
		// planRequests sized this request so that Voyage's answer to it
		// fits max_result_bytes (its estimate is an upper bound): a longer
		// answer is not Voyage's (a proxy's page, an endless stream), and
		// its size says nothing of the message.
		return nil, sdk.Transient(fmt.Sprintf("voyage: %s with an answer over max_result_bytes (%d), which Voyage's answer to this request does not reach: not read further",
			resp.Status, s.maxResultBytes)).WithStatus(resp.StatusCode)
	}
	got, err := parseEmbeddings(raw, to-from, r.params)
	if err != nil {
		// A 2xx we cannot read is most likely a proxy or a glitch, not an
		// answer to this input: retrying is safe (embedding is idempotent).
		return nil, sdk.Transient(fmt.Sprintf("voyage: %s with an unusable body: %v", resp.Status, err)).WithStatus(resp.StatusCode)
	}
	s.pace.charge(time.Now(), int(got.Usage.TotalTokens)-tokens)
	for i := range got.Data {
		got.Data[i].Index += from
	}
	return got, sdk.Success(nil).WithStatus(resp.StatusCode)
}

// wireEncoding is the encoding_format sent: "base64", or none for float.
func (s *sender) wireEncoding() string {
	if s.encoding == EncodingBase64 {
		return EncodingBase64
	}
	return ""
}

// parseEmbeddings checks Voyage's 2xx body (one embedding per input, each
// index once, each of the dimension p asks for when it is known), decodes
// base64 embeddings into JSON numbers of p's dtype, and orders the entries
// by index.
func parseEmbeddings(raw []byte, inputs int, p params) (*embedResponse, error) {
	dtype := p.OutputDtype
	// want is the values each embedding has: known when the request names
	// its dimension or the model is in the table; 0 for a model the plugin
	// does not know (its dimension is Voyage's to say).
	want := 0
	if _, known := models[p.Model]; known || p.OutputDimension != 0 {
		want, _, _, _ = dtypeInfo(dtype, p.dimension())
	}
	var r embedResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("not an embeddings response: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(r.Data) != inputs {
		return nil, fmt.Errorf("%d embeddings for %d inputs", len(r.Data), inputs)
	}
	ordered := make([]embeddingEntry, inputs)
	seen := make([]bool, inputs)
	dims := 0 // values in the first embedding
	for _, e := range r.Data {
		if e.Index < 0 || e.Index >= inputs || seen[e.Index] {
			return nil, fmt.Errorf("embedding index %d is out of range or repeated", e.Index)
		}
		var n int
		switch {
		case len(e.Embedding) > 0 && e.Embedding[0] == '[':
			// JSON numbers already (encoding_format float, or a model that
			// answers base64 requests with numbers, as Voyage's client
			// allows): what is stored must be what Voyage's answer is, a
			// list of finite numbers, and in the form the result's size
			// was estimated for (a float32's shortest form, as the base64
			// path writes it): Voyage writes Python's float64 repr of each
			// float32 (up to 17 digits), and stored as it came, a result
			// estimated to fit the host's 4 MiB was 4.9 MB and dropped.
			numbers, count, err := normalizeVector(e.Embedding, dtype)
			if err != nil {
				return nil, fmt.Errorf("embedding %d: %v", e.Index, err)
			}
			e.Embedding, n = numbers, count
		case len(e.Embedding) > 0 && e.Embedding[0] == '"':
			var b64 string
			if err := json.Unmarshal(e.Embedding, &b64); err != nil {
				return nil, fmt.Errorf("embedding %d: %v", e.Index, err)
			}
			numbers, err := decodeBase64Embedding(b64, dtype)
			if err != nil {
				return nil, fmt.Errorf("embedding %d: %v", e.Index, err)
			}
			if n, err = vectorLen(numbers); err != nil {
				return nil, fmt.Errorf("embedding %d: %v", e.Index, err)
			}
			e.Embedding = numbers
		default:
			return nil, fmt.Errorf("embedding %d is not a vector", e.Index)
		}
		// Every embedding as long as the others.
		switch {
		case dims == 0:
			dims = n
		case n != dims:
			return nil, fmt.Errorf("embedding %d has %d values, embedding %d has %d", e.Index, n, r.Data[0].Index, dims)
		}
		seen[e.Index] = true
		ordered[e.Index] = e
	}
	if want != 0 && dims != want {
		// And as long as the request asked: stored, they were vectors a
		// store of the asked dimension refuses, and more values than the
		// result's size was planned for.
		return nil, fmt.Errorf("the embeddings have %d values; %s at %d dimensions (%s) has %d", dims, p.Model, p.dimension(), dtypeName(dtype), want)
	}
	r.Data = ordered
	return &r, nil
}

// vectorLen is the number of values in a JSON array of numbers written by
// decodeBase64Embedding, and an error for an empty one.
func vectorLen(raw json.RawMessage) (int, error) {
	b := bytes.TrimSpace(raw)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return 0, errors.New("not a vector")
	}
	if len(bytes.TrimSpace(b[1:len(b)-1])) == 0 {
		return 0, errors.New("no values")
	}
	return bytes.Count(b, []byte(",")) + 1, nil
}

// normalizeVector checks a JSON array of numbers from Voyage's answer and
// writes it again in the form the stored result's size was estimated for:
// each value as output_dtype's type holds it (a float32 in its shortest
// form, as encoding/json writes one; int8 and binary -128 to 127, uint8
// and ubinary 0 to 255). The error names the first value that is not one
// (a string, null, an object, a nested array, a number past the type's
// range, a fraction for an integer type) or the array's emptiness. raw is
// valid JSON (it came out of the answer's Unmarshal), so a value is a number
// when its first byte says so. One pass over the bytes; the output is at
// most 18 bytes a value whatever the input's form.
func normalizeVector(raw json.RawMessage, dtype string) (json.RawMessage, int, error) {
	b := bytes.TrimSpace(raw)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, 0, errors.New("not a vector")
	}
	b = b[1 : len(b)-1]
	out := make([]byte, 0, len(b)+2)
	out = append(out, '[')
	n := 0
	for {
		b = bytes.TrimLeft(b, " \t\r\n")
		if len(b) == 0 {
			break
		}
		end := bytes.IndexByte(b, ',')
		if end < 0 {
			end = len(b)
		}
		v := bytes.TrimRight(b[:end], " \t\r\n")
		switch c := v[0]; {
		case c == '-' || c >= '0' && c <= '9':
		case c == '"':
			return nil, 0, fmt.Errorf("value %d is a string, not a number", n)
		case c == 'n':
			return nil, 0, fmt.Errorf("value %d is null, not a number", n)
		case c == 't' || c == 'f':
			return nil, 0, fmt.Errorf("value %d is a boolean, not a number", n)
		default:
			return nil, 0, fmt.Errorf("value %d is an array or object, not a number", n)
		}
		if n > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = appendValue(out, v, dtype); err != nil {
			return nil, 0, fmt.Errorf("value %d (%.32s) %v", n, v, err)
		}
		n++
		if end == len(b) {
			break
		}
		b = b[end+1:]
	}
	if n == 0 {
		return nil, 0, errors.New("no values")
	}
	return append(out, ']'), n, nil
}

// appendValue appends the JSON number v as dtype's type holds it.
func appendValue(out, v []byte, dtype string) ([]byte, error) {
	lo, hi := 0.0, 0.0
	switch dtype {
	case "int8", "binary":
		lo, hi = math.MinInt8, math.MaxInt8
	case "uint8", "ubinary":
		lo, hi = 0, math.MaxUint8
	default:
		f, err := strconv.ParseFloat(string(v), 32)
		if err != nil || math.IsInf(f, 0) {
			return out, errors.New("is not a finite number (a float32)")
		}
		return appendFloat32(out, float32(f)), nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || f < lo || f > hi {
		return out, fmt.Errorf("is not an integer from %v to %v (%s)", lo, hi, dtype)
	}
	return strconv.AppendInt(out, int64(f), 10), nil
}

// errorDetail is Voyage's `detail` from an error body, or the body's start
// when it is not Voyage's JSON.
func errorDetail(raw []byte) string {
	var e errorResponse
	if json.Unmarshal(raw, &e) == nil && e.Detail != nil {
		switch d := e.Detail.(type) {
		case string:
			return oneLine(d, 512)
		default:
			// FastAPI-style validation errors: a list of objects.
			b, _ := json.Marshal(d)
			return oneLine(string(b), 512)
		}
	}
	if s := oneLine(string(raw), 512); s != "" {
		return s
	}
	return "(no body)"
}

// post sends the result to the callback URL. Its failure is classified like
// any HTTP send (sdk.ClassifyHTTP): a transient one retries the whole
// notification, so the callback receives the embeddings at least once.
//
// A part of a split notification (p not nil) carries part, parts and offset,
// and its own Idempotency-Key (the notification's, then "/part-N"), so a
// receiver that drops repeated keys keeps every part.
func (c *callback) post(ctx context.Context, client *http.Client, m *sdk.Message, result json.RawMessage, p *part) sdk.Verdict {
	var createdAt *time.Time
	if !m.CreatedAt.IsZero() {
		t := m.CreatedAt.UTC()
		createdAt = &t
	}
	body, err := json.Marshal(struct {
		ID             int64      `json:"id"`
		Channel        string     `json:"channel"`
		Recipient      string     `json:"recipient"`
		IdempotencyKey string     `json:"idempotency_key,omitempty"`
		Attempt        int        `json:"attempt"`
		CreatedAt      *time.Time `json:"created_at"`
		*part
		Result json.RawMessage `json:"result"`
	}{m.ID, m.Channel, m.Recipient, m.IdempotencyKey, m.Attempt, createdAt, p, result})
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("callback: encode body: %v", err))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url.String(), bytes.NewReader(body))
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("callback: build request: %v", err))
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	key := m.IdempotencyKey
	if key == "" {
		key = strconv.FormatInt(m.ID, 10)
	}
	if p != nil {
		key += "/part-" + strconv.Itoa(p.Part)
	}
	req.Header.Set("Idempotency-Key", key)

	// net/http replays a request with an Idempotency-Key on every idle
	// connection lost before the answer (64 a host): once is enough.
	resp, err := client.Do(sdk.ReplayOnce(req))
	if err != nil {
		v := sdk.ClassifyHTTP(nil, redactURLError(err))
		v.Detail = c.secrets.Redact("callback " + redactURL(c.url) + ": " + oneLine(v.Detail, 1024))
		return v
	}
	defer resp.Body.Close()
	respBody := resp.Body // ClassifyHTTP may replace resp.Body
	defer context.AfterFunc(req.Context(), func() { _ = respBody.Close() })()
	v := sdk.ClassifyHTTP(resp, nil)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	// A 409 is retried: the callback carries an Idempotency-Key, which
	// sdk.ClassifyHTTP reads as a request still in progress at the receiver.
	if v.Outcome != sdk.OutcomeSuccess {
		// The receiver's body may echo the callback headers back.
		v.Detail = c.secrets.Redact("callback " + redactURL(c.url) + ": " + oneLine(v.Detail, 1024))
	}
	return v
}

// redactURLError keeps the shape of a *url.Error (so timeouts still read as
// timeouts) but drops the URL's query and user info, which may hold a token.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			return &url.Error{Op: ue.Op, URL: redactURL(u), Err: ue.Err}
		}
		return &url.Error{Op: ue.Op, URL: "(callback URL)", Err: ue.Err}
	}
	return err
}

// redactURL prints u without user info or query.
func redactURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// scrub removes the channel's credentials from text that will be logged or
// stored.
func (s *sender) scrub(text string) string { return s.secrets.Redact(text) }

// oneLine flattens s to one printable line of at most max bytes.
func oneLine(s string, max int) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < 0x20 || r == ' ' || r == 0x7f }), " ")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
