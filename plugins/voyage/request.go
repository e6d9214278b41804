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

// check reports the first field Voyage would refuse, named as key: a value
// no model takes, then one p.Model does not (checkModel).
func (p params) check() (key, reason string) {
	switch {
	case p.InputType != "" && !slices.Contains(inputTypes, p.InputType):
		return "input_type", fmt.Sprintf("is %q; want query or document (or leave it out)", p.InputType)
	case p.OutputDtype != "" && !slices.Contains(outputDtypes, p.OutputDtype):
		return "output_dtype", fmt.Sprintf("is %q; want one of %s", p.OutputDtype, strings.Join(outputDtypes, ", "))
	case p.OutputDimension != 0 && !slices.Contains(outputDimensions, p.OutputDimension):
		return "output_dimension", fmt.Sprintf("is %d; want %s", p.OutputDimension, orList(outputDimensions))
	}
	return p.checkModel()
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
	// EncodingFormat is "base64" or left out (Voyage: null, JSON numbers).
	EncodingFormat string `json:"encoding_format,omitempty"`
}

// request is a checked payload: what to embed and how.
type request struct {
	texts []string
	// single: input was one string, and is sent as one.
	single bool
	params params
	// tokens is estimateTokens(texts).
	tokens int
}

// errPayload marks a payload that no retry can fix.
type errPayload struct{ reason string }

func (e *errPayload) Error() string { return "payload: " + e.reason }

func payloadErr(format string, args ...any) error {
	return &errPayload{reason: fmt.Sprintf(format, args...)}
}

// parseRequest checks a payload against the channel's defaults, refusing
// before anything is sent what Voyage would refuse: a malformed payload, a
// bad parameter, too many inputs, too many tokens. maxTokens overrides the
// model's documented token cap when > 0.
func parseRequest(raw json.RawMessage, defaults params, maxTokens int) (*request, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, payloadErr(`is empty; want {"input": "text" or ["text", ...]}`)
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, payloadErr("%s", describeJSONError(err))
	}
	if dec.More() {
		return nil, payloadErr("has data after the JSON object")
	}

	texts, single, err := parseInput(p.Input)
	if err != nil {
		return nil, err
	}
	if len(texts) > MaxInputs {
		return nil, payloadErr("input has %d texts; Voyage takes at most %d per request", len(texts), MaxInputs)
	}
	for i, t := range texts {
		if t == "" {
			if single {
				return nil, payloadErr("input is an empty string")
			}
			return nil, payloadErr("input[%d] is an empty string", i)
		}
	}

	merged := defaults.override(p.params)
	if merged.Model == "" {
		return nil, payloadErr("no model: set model in the channel config or the payload")
	}
	if key, reason := merged.check(); key != "" {
		return nil, payloadErr("%s %s", key, reason)
	}
	limit := maxTokens
	if limit <= 0 {
		limit = tokenLimit(merged.Model)
	}
	est := estimateTokens(texts)
	if est > limit {
		return nil, payloadErr("input is about %d tokens (estimated at %d bytes per token); %s takes at most %d per request",
			est, bytesPerToken, merged.Model, limit)
	}
	return &request{texts: texts, single: single, params: merged, tokens: est}, nil
}

// body is the embeddings request for texts[from:to]; a single string input
// stays a string.
func (r *request) body(from, to int, encodingFormat string) ([]byte, error) {
	var input []byte
	var err error
	if r.single {
		input, err = json.Marshal(r.texts[0])
	} else {
		input, err = json.Marshal(r.texts[from:to])
	}
	if err != nil {
		return nil, fmt.Errorf("encode input: %w", err)
	}
	body, err := json.Marshal(embedRequest{Input: input, params: r.params, EncodingFormat: encodingFormat})
	if err != nil {
		return nil, fmt.Errorf("encode embeddings request: %w", err)
	}
	return body, nil
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
