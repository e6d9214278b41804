package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	DefaultTimeout   = 10 * time.Second
	DefaultUserAgent = "notifyd-webhook/" + Version
	// maxIdleConnsPerHost keeps a warm connection for every concurrent send
	// to one receiver. It must be at least the channel's concurrency (and the
	// SDK's fan-out), or connections churn through TIME_WAIT under load.
	maxIdleConnsPerHost = 1024
	secretPrefix        = "whsec_"
)

// provider builds a sender per channel. All channels of the process share
// one Transport, so channels pointed at the same receiver share its pool.
type provider struct {
	once      sync.Once
	transport *http.Transport
}

// config is a channel's `config:` block.
type config struct {
	URL               string            `json:"url"`
	AllowRecipientURL bool              `json:"allow_recipient_url"`
	Secret            string            `json:"secret"`
	Timeout           string            `json:"timeout"`
	RetryAllNon2xx    bool              `json:"retry_all_non_2xx"`
	Headers           map[string]string `json:"headers"`
	UserAgent         string            `json:"user_agent"`
}

// reservedHeaders are set by the plugin on every request; a static header
// may not replace them (User-Agent has its own key).
var reservedHeaders = []string{
	hdrWebhookID, hdrWebhookTimestamp, hdrWebhookSignature, hdrIdempotencyKey,
	hdrContentType, hdrUserAgent, "Content-Length", "Host", "Transfer-Encoding", "Connection",
}

func (p *provider) Describe() sdk.Info {
	return sdk.Info{
		Name:           "webhook",
		Version:        Version,
		Capabilities:   []string{"standard-webhooks", "idempotency-key"},
		ConfigSchema:   configSchema,
		MaxConcurrency: 256,
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
	if req.Logger != nil {
		// Never the secret or header values: only whether they are set.
		req.Logger.Info("webhook channel configured", "channel", req.Channel,
			"url", redactString(c.URL), "signed", s.macs != nil,
			"allow_recipient_url", c.AllowRecipientURL, "retry_all_non_2xx", c.RetryAllNon2xx,
			"timeout", s.timeout.String(), "extra_headers", len(s.headers))
	}
	return s, nil
}

// newSender validates c and builds its sender.
func (p *provider) newSender(c config) (*sender, error) {
	s := &sender{
		client:            p.client(),
		allowRecipientURL: c.AllowRecipientURL,
		retryAllNon2xx:    c.RetryAllNon2xx,
		userAgent:         []string{DefaultUserAgent},
	}
	switch {
	case c.URL != "":
		u, err := sdk.ParseHTTPURL(c.URL)
		if err != nil {
			return nil, configError("url", err.Error())
		}
		s.url = u
	case !c.AllowRecipientURL:
		return nil, configError("url", "is required (or set allow_recipient_url: true and send to URL recipients)")
	}
	timeout, err := sdk.ParseDuration(c.Timeout, DefaultTimeout)
	if err != nil {
		return nil, configError("timeout", err.Error())
	}
	s.timeout = timeout
	if c.UserAgent != "" {
		if err := sdk.CheckHeaderValue(c.UserAgent); err != nil {
			return nil, configError("user_agent", err.Error())
		}
		s.userAgent = []string{c.UserAgent}
	}
	if c.Secret != "" {
		key, err := decodeSecret(c.Secret)
		if err != nil {
			return nil, configError("secret", err.Error())
		}
		s.macs = newMACPool(key)
	}
	if len(c.Headers) > 0 {
		s.headers = make(http.Header, len(c.Headers))
		for name, value := range c.Headers {
			canon, err := sdk.ParseHeader(name, value, reservedHeaders...)
			if err != nil {
				return nil, configError("headers."+name, err.Error())
			}
			s.headers[canon] = []string{value}
		}
	}
	return s, nil
}

// client returns the process-wide client, built on first use.
func (p *provider) client() *http.Client {
	p.once.Do(func() {
		p.transport = &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{
				Timeout:   5 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          4 * maxIdleConnsPerHost,
			MaxIdleConnsPerHost:   maxIdleConnsPerHost,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	})
	return &http.Client{
		Transport: p.transport,
		// A redirected POST would silently become a GET: the 3xx itself is
		// the answer, classified like any other non-2xx.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// decodeSecret returns the HMAC key of a Standard Webhooks secret:
// "whsec_" followed by the base64 of the key bytes.
func decodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, errors.New(`must start with "whsec_" followed by the base64 of the key`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		// Never echo the secret, not even the part that failed to decode.
		return nil, errors.New(`the part after "whsec_" is not valid base64`)
	}
	if len(key) == 0 {
		return nil, errors.New(`the key after "whsec_" is empty`)
	}
	return key, nil
}

func configError(key, reason string) error {
	return fmt.Errorf("webhook config: %s %s", key, reason)
}

// configSchema documents the channel config (JSON Schema).
var configSchema = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "url": {"type": "string", "format": "uri", "description": "Where envelopes are POSTed (http or https)."},
    "allow_recipient_url": {"type": "boolean", "default": false, "description": "A recipient that is an http(s) URL is POSTed to instead of url."},
    "secret": {"type": "string", "pattern": "^whsec_", "description": "Standard Webhooks signing secret: whsec_<base64 key>."},
    "timeout": {"type": "string", "default": "10s", "description": "Per-request timeout (Go duration)."},
    "retry_all_non_2xx": {"type": "boolean", "default": false, "description": "Treat every non-2xx answer as transient (Standard Webhooks' rule)."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra static headers."},
    "user_agent": {"type": "string", "default": "notifyd-webhook/` + Version + `"}
  }
}`)
