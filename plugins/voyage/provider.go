package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// Version is the plugin's version, reported by Describe.
const Version = "1.0.0"

// Defaults for keys the channel leaves out.
const (
	DefaultBaseURL         = "https://api.voyageai.com"
	DefaultTimeout         = 30 * time.Second
	DefaultCallbackTimeout = 10 * time.Second
	// DefaultMaxResultBytes bounds Voyage's answer, which becomes the
	// notification's result. Results of one Send batch travel back to the host
	// in one gRPC message (64 MB at most), so batch_size × this must stay
	// under that.
	DefaultMaxResultBytes = 4 << 20
	userAgent             = "notifyd-voyage/" + Version
	embeddingsPath        = "/v1/embeddings"
)

// callbackReservedHeaders are set by the plugin on every callback; a
// callback header may not replace them.
var callbackReservedHeaders = []string{
	"Content-Type", "Content-Length", "Idempotency-Key", "Host", "Transfer-Encoding", "Connection",
}

// provider builds a sender per channel; all channels share one Transport.
type provider struct {
	once      sync.Once
	transport *http.Transport

	mu     sync.Mutex
	pacers map[string]*pacer // by channel: every sender of a channel shares one
}

// config is a channel's `config:` block.
type config struct {
	APIKey          string            `json:"api_key"`
	BaseURL         string            `json:"base_url"`
	Model           string            `json:"model"`
	InputType       string            `json:"input_type"`
	Truncation      *bool             `json:"truncation"`
	OutputDimension int               `json:"output_dimension"`
	OutputDtype     string            `json:"output_dtype"`
	Timeout         string            `json:"timeout"`
	MaxBatchTokens  int               `json:"max_batch_tokens"`
	MaxResultBytes  int64             `json:"max_result_bytes"`
	EncodingFormat  string            `json:"encoding_format"`
	RPM             *int              `json:"rpm"`
	TPM             *int              `json:"tpm"`
	CallbackURL     string            `json:"callback_url"`
	CallbackHeaders map[string]string `json:"callback_headers"`
	CallbackTimeout string            `json:"callback_timeout"`
}

func (p *provider) Describe() sdk.Info {
	return sdk.Info{
		Name:         "voyage",
		Version:      Version,
		Capabilities: []string{"embeddings", "result", "callback"},
		ConfigSchema: configSchema,
		// Voyage's tier 1 allows 2000 requests a minute, and the channel's
		// pacer holds to rpm/tpm; more parallel requests only wait longer.
		MaxConcurrency: 32,
	}
}

func (p *provider) Configure(ctx context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var c config
	if err := req.Decode(&c); err != nil {
		return nil, err
	}
	s, err := p.newSender(c)
	if err != nil {
		return nil, err
	}
	rpm, tpm := rateLimits(c.Model)
	if c.RPM != nil {
		rpm = *c.RPM
	}
	if c.TPM != nil {
		tpm = *c.TPM
	}
	s.pace = p.pacer(req.Channel, rpm, tpm)
	if req.Logger != nil {
		// Never the api_key or callback header values.
		req.Logger.Info("voyage channel configured", "channel", req.Channel,
			"endpoint", sdk.RedactURL(s.endpoint), "model", c.Model, "callback", c.CallbackURL != "",
			"rpm", rpm, "tpm", tpm, "encoding_format", s.encoding)
	}
	return s, nil
}

// newSender validates c and builds its sender.
func (p *provider) newSender(c config) (*sender, error) {
	if c.APIKey == "" {
		return nil, configError("api_key", "is required")
	}
	if err := sdk.CheckHeaderValue(c.APIKey); err != nil {
		return nil, configError("api_key", err.Error())
	}
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := sdk.ParseHTTPURL(base)
	if err != nil {
		return nil, configError("base_url", err.Error())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		// The endpoint path is appended to it: a query would swallow it.
		return nil, configError("base_url", "must be a base URL without query or fragment")
	}
	if c.Model == "" {
		return nil, configError("model", "is required (e.g. voyage-3.5); a payload may still override it")
	}
	defaults := params{
		Model: c.Model, InputType: c.InputType, Truncation: c.Truncation,
		OutputDimension: c.OutputDimension, OutputDtype: c.OutputDtype,
	}
	if key, reason := defaults.check(); key != "" {
		return nil, configError(key, reason)
	}
	s := &sender{
		client:         p.client(),
		endpoint:       strings.TrimSuffix(u.String(), "/") + embeddingsPath,
		authorization:  "Bearer " + c.APIKey,
		secrets:        &sdk.Redactor{},
		defaults:       defaults,
		maxBatchTokens: c.MaxBatchTokens,
		maxResultBytes: c.MaxResultBytes,
	}
	s.secrets.Add(c.APIKey)
	s.secrets.Add(sdk.URLSecrets(u)...)
	if s.timeout, err = sdk.ParseDuration(c.Timeout, DefaultTimeout); err != nil {
		return nil, configError("timeout", err.Error())
	}
	if s.maxBatchTokens < 0 {
		return nil, configError("max_batch_tokens", "must be positive (0 means the model's documented limit)")
	}
	switch {
	case s.maxResultBytes < 0:
		return nil, configError("max_result_bytes", "must be positive")
	case s.maxResultBytes == 0:
		s.maxResultBytes = DefaultMaxResultBytes
	}
	switch c.EncodingFormat {
	case "", EncodingBase64:
		s.encoding = EncodingBase64
	case EncodingFloat:
		s.encoding = EncodingFloat
	default:
		return nil, configError("encoding_format", fmt.Sprintf("is %q; want base64 (the default) or float", c.EncodingFormat))
	}
	for key, v := range map[string]*int{"rpm": c.RPM, "tpm": c.TPM} {
		if v != nil && *v < 0 {
			return nil, configError(key, "must be 0 (unlimited) or more; leave it out for Voyage's tier-1 limit of the model")
		}
	}

	if c.CallbackURL == "" {
		if len(c.CallbackHeaders) > 0 {
			return nil, configError("callback_headers", "is set but callback_url is not")
		}
		return s, nil
	}
	cb, err := sdk.ParseHTTPURL(c.CallbackURL)
	if err != nil {
		return nil, configError("callback_url", err.Error())
	}
	s.callback = &callback{url: cb, secrets: s.secrets}
	s.secrets.Add(sdk.URLSecrets(cb)...)
	if s.callback.timeout, err = sdk.ParseDuration(c.CallbackTimeout, DefaultCallbackTimeout); err != nil {
		return nil, configError("callback_timeout", err.Error())
	}
	for name, value := range c.CallbackHeaders {
		canon, err := sdk.ParseHeader(name, value, callbackReservedHeaders...)
		if err != nil {
			return nil, configError("callback_headers."+name, err.Error())
		}
		if s.callback.headers == nil {
			s.callback.headers = make(http.Header, len(c.CallbackHeaders))
		}
		s.callback.headers[canon] = []string{value}
		s.secrets.Add(sdk.HeaderSecrets(value)...)
	}
	return s, nil
}

// pacer returns the channel's pacer, made or updated to rpm and tpm.
func (p *provider) pacer(channel string, rpm, tpm int) *pacer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc, ok := p.pacers[channel]; ok {
		pc.set(rpm, tpm)
		return pc
	}
	if p.pacers == nil {
		p.pacers = make(map[string]*pacer)
	}
	pc := newPacer(rpm, tpm)
	p.pacers[channel] = pc
	return pc
}

// client returns a client on the process-wide Transport.
func (p *provider) client() *http.Client {
	p.once.Do(func() {
		p.transport = &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{
				Timeout:   10 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			// An answer's status line and headers, as the SDK's own client
			// reads them: net/http's default is 10 MiB, allocated several
			// times over while parsed, per request in flight.
			MaxResponseHeaderBytes: sdk.MaxHTTPAnswerHeader,
		}
	})
	return &http.Client{
		Transport: p.transport,
		// A redirected POST would become a GET; the 3xx is the answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func configError(key, reason string) error {
	return fmt.Errorf("voyage config: %s %s", key, reason)
}

// configSchema documents the channel config (JSON Schema).
var configSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["api_key", "model"],
  "properties": {
    "api_key": {"type": "string", "description": "Voyage API key, sent as a Bearer token."},
    "base_url": {"type": "string", "format": "uri", "default": "https://api.voyageai.com"},
    "model": {"type": "string", "description": "e.g. voyage-3.5, voyage-4-large, voyage-code-3."},
    "input_type": {"enum": ["query", "document"]},
    "truncation": {"type": "boolean", "description": "Voyage's default is true."},
    "output_dimension": {"enum": [256, 512, 1024, 2048], "description": "Models with a fixed dimension take none; checked per model."},
    "output_dtype": {"enum": ["float", "int8", "uint8", "binary", "ubinary"], "description": "Older models take float only; checked per model."},
    "encoding_format": {"enum": ["base64", "float"], "default": "base64", "description": "How Voyage sends embeddings; the result holds JSON numbers either way."},
    "rpm": {"type": "integer", "minimum": 0, "description": "Requests per minute for the channel in this process; default Voyage's tier-1 limit of the model, 0 unlimited."},
    "tpm": {"type": "integer", "minimum": 0, "description": "Tokens per minute (estimated) for the channel in this process; default Voyage's tier-1 limit of the model, 0 unlimited."},
    "timeout": {"type": "string", "default": "30s", "description": "Per-request timeout (Go duration)."},
    "max_batch_tokens": {"type": "integer", "minimum": 0, "description": "Token cap per request; 0 means the model's documented limit."},
    "max_result_bytes": {"type": "integer", "minimum": 0, "default": 4194304, "description": "Cap on one Voyage answer and on the stored result (itself at most 4 MiB)."},
    "callback_url": {"type": "string", "format": "uri", "description": "Where embeddings are POSTed after each success, in parts when they are too big to store."},
    "callback_headers": {"type": "object", "additionalProperties": {"type": "string"}},
    "callback_timeout": {"type": "string", "default": "10s"}
  }
}`)
