package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Voyage's documented limits on one POST /v1/embeddings
// (https://docs.voyageai.com/reference/embeddings-api).
const (
	// MaxInputs is the longest input list one request may carry.
	MaxInputs = 1000
	// bytesPerToken turns UTF-8 bytes into an estimated token count. Voyage's
	// tokenizers average about 4 bytes per token on English and fewer on code
	// and CJK text, so dividing by 6 rarely over-counts: a request refused on
	// this estimate is over the limit on any ordinary text, while one that
	// slips under it and is still too long is refused by Voyage itself with a
	// 400 (permanent too). A false refusal would dead-letter a notification
	// Voyage would have accepted; a missed one costs a single request.
	bytesPerToken = 6
)

// tokenLimits is Voyage's documented cap on the total tokens of one
// request's inputs, per model. Models not listed get the smallest cap
// (defaultTokenLimit) unless the channel sets max_batch_tokens.
var tokenLimits = map[string]int{
	"voyage-4-lite":   1_000_000,
	"voyage-3.5-lite": 1_000_000,
	"voyage-3-lite":   1_000_000,

	"voyage-4":   320_000,
	"voyage-3.5": 320_000,
	"voyage-3":   320_000,
	"voyage-2":   320_000,

	"voyage-4-large":          120_000,
	"voyage-3-large":          120_000,
	"voyage-code-3":           120_000,
	"voyage-finance-2":        120_000,
	"voyage-law-2":            120_000,
	"voyage-multilingual-2":   120_000,
	"voyage-large-2":          120_000,
	"voyage-large-2-instruct": 120_000,
	"voyage-code-2":           120_000,
}

const defaultTokenLimit = 120_000

// The values Voyage accepts for the enumerated parameters.
var (
	inputTypes       = []string{"query", "document"}
	outputDtypes     = []string{"float", "int8", "uint8", "binary", "ubinary"}
	outputDimensions = []int{256, 512, 1024, 2048}
)

// params are the request's knobs: set by the channel config, overridable per
// payload. Zero values mean "not set": Voyage's own default applies.
type params struct {
	Model           string `json:"model,omitempty"`
	InputType       string `json:"input_type,omitempty"`
	Truncation      *bool  `json:"truncation,omitempty"`
	OutputDimension int    `json:"output_dimension,omitempty"`
	OutputDtype     string `json:"output_dtype,omitempty"`
}

// override returns p with every field o sets replaced.
func (p params) override(o params) params {
	if o.Model != "" {
		p.Model = o.Model
	}
	if o.InputType != "" {
		p.InputType = o.InputType
	}
	if o.Truncation != nil {
		p.Truncation = o.Truncation
	}
	if o.OutputDimension != 0 {
		p.OutputDimension = o.OutputDimension
	}
	if o.OutputDtype != "" {
		p.OutputDtype = o.OutputDtype
	}
	return p
}

// check reports the first field Voyage would refuse, named as key.
func (p params) check() (key, reason string) {
	switch {
	case p.InputType != "" && !slices.Contains(inputTypes, p.InputType):
		return "input_type", fmt.Sprintf("is %q; want query or document (or leave it out)", p.InputType)
	case p.OutputDtype != "" && !slices.Contains(outputDtypes, p.OutputDtype):
		return "output_dtype", fmt.Sprintf("is %q; want one of %s", p.OutputDtype, strings.Join(outputDtypes, ", "))
	case p.OutputDimension != 0 && !slices.Contains(outputDimensions, p.OutputDimension):
		return "output_dimension", fmt.Sprintf("is %d; want 256, 512, 1024 or 2048", p.OutputDimension)
	}
	return "", ""
}

// payload is a notification's payload:
//
//	{"input": "text" | ["text", …], "model": …, "input_type": …, …}
//
// Every key but input is an optional override of the channel's setting.
type payload struct {
	Input json.RawMessage `json:"input"`
	params
}

// embedRequest is the body of POST /v1/embeddings.
type embedRequest struct {
	Input json.RawMessage `json:"input"`
	params
}

// errPayload marks a payload that no retry can fix.
type errPayload struct{ reason string }

func (e *errPayload) Error() string { return "payload: " + e.reason }

func payloadErr(format string, args ...any) error {
	return &errPayload{reason: fmt.Sprintf(format, args...)}
}

// buildRequest turns a payload into the embeddings request body and the
// number of inputs it carries, refusing before anything is sent what Voyage
// would refuse: a malformed payload, a bad parameter, too many inputs, too
// many tokens. maxTokens overrides the model's documented token cap when > 0.
func buildRequest(raw json.RawMessage, defaults params, maxTokens int) (body []byte, inputs int, err error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, 0, payloadErr(`is empty; want {"input": "text" or ["text", ...]}`)
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, 0, payloadErr("%s", describeJSONError(err))
	}
	if dec.More() {
		return nil, 0, payloadErr("has data after the JSON object")
	}

	texts, single, err := parseInput(p.Input)
	if err != nil {
		return nil, 0, err
	}
	if len(texts) > MaxInputs {
		return nil, 0, payloadErr("input has %d texts; Voyage takes at most %d per request", len(texts), MaxInputs)
	}
	for i, t := range texts {
		if t == "" {
			if single {
				return nil, 0, payloadErr("input is an empty string")
			}
			return nil, 0, payloadErr("input[%d] is an empty string", i)
		}
	}

	merged := defaults.override(p.params)
	if merged.Model == "" {
		return nil, 0, payloadErr("no model: set model in the channel config or the payload")
	}
	if key, reason := merged.check(); key != "" {
		return nil, 0, payloadErr("%s %s", key, reason)
	}
	limit := maxTokens
	if limit <= 0 {
		limit = tokenLimit(merged.Model)
	}
	if est := estimateTokens(texts); est > limit {
		return nil, 0, payloadErr("input is about %d tokens (estimated at %d bytes per token); %s takes at most %d per request",
			est, bytesPerToken, merged.Model, limit)
	}

	var input json.RawMessage
	if single {
		input, err = json.Marshal(texts[0])
	} else {
		input, err = json.Marshal(texts)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("encode input: %w", err)
	}
	body, err = json.Marshal(embedRequest{Input: input, params: merged})
	if err != nil {
		return nil, 0, fmt.Errorf("encode embeddings request: %w", err)
	}
	return body, len(texts), nil
}

// parseInput accepts a string or a list of strings.
func parseInput(raw json.RawMessage) (texts []string, single bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return nil, false, payloadErr(`has no input; want {"input": "text" or ["text", ...]}`)
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false, payloadErr("input: %s", describeJSONError(err))
		}
		return []string{s}, true, nil
	case raw[0] == '[':
		if err := json.Unmarshal(raw, &texts); err != nil {
			return nil, false, payloadErr("input must be a string or a list of strings: %s", describeJSONError(err))
		}
		if len(texts) == 0 {
			return nil, false, payloadErr("input is an empty list")
		}
		return texts, false, nil
	}
	return nil, false, payloadErr("input must be a string or a list of strings")
}

// tokenLimit is the documented per-request token cap of model.
func tokenLimit(model string) int {
	if n, ok := tokenLimits[model]; ok {
		return n
	}
	return defaultTokenLimit
}

// estimateTokens estimates the tokens of texts: each text's UTF-8 length
// divided by bytesPerToken, rounded up (every text is at least one token).
func estimateTokens(texts []string) int {
	n := 0
	for _, t := range texts {
		n += (len(t) + bytesPerToken - 1) / bytesPerToken
	}
	return n
}

// describeJSONError says what was wrong without quoting the payload.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		want := typeErr.Type.String()
		switch want {
		case "*bool", "bool":
			want = "a boolean"
		case "int":
			want = "an integer"
		case "string":
			want = "a string"
		}
		return fmt.Sprintf("%s is a JSON %s; want %s", typeErr.Field, typeErr.Value, want)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
