package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// pluginVersion is this plugin's version, reported by Describe.
const pluginVersion = "0.1.0"

// provider is the Kakao plugin: one process serves every Kakao channel.
type provider struct {
	// now is the clock for quota resets; nil means time.Now. Tests set it.
	now func() time.Time
	// keepTick is how often a channel's token keeper looks at the clock;
	// 0 means keepTick. Tests shorten it.
	keepTick time.Duration
}

func (p *provider) Describe() sdk.Info {
	return sdk.Info{
		Name:         "kakao",
		Version:      pluginVersion,
		Capabilities: []string{"memo", "friends", "alimtalk", "batch"},
		ConfigSchema: json.RawMessage(configSchema),
	}
}

// Configure validates the channel config and builds its sender.
func (p *provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	c, err := parseConfig(req)
	if err != nil {
		return nil, err
	}
	logger := req.Log()
	now := p.now
	if now == nil {
		now = time.Now
	}
	if c.mode == modeAlimtalk {
		return newAlimtalkSender(c, now), nil
	}

	// The config's own tokens stay secrets to redact even when token_file
	// supersedes them.
	configTokens := []string{c.accessToken, c.refreshToken}
	var store *tokenFile
	if c.tokenFile != "" {
		var access, refresh string
		var ok bool
		store, access, refresh, ok, err = openTokenFile(c.tokenFile, c.refreshToken)
		if err != nil {
			return nil, err
		}
		if ok {
			c.accessToken, c.refreshToken = access, refresh
			logger.Info("kakao: using the tokens saved in token_file", "token_file", c.tokenFile)
		}
	}

	client := &http.Client{
		Transport: newTransport(),
		// Kakao does not redirect; following one would carry the bearer
		// token somewhere unexpected.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	endpoint := c.apiURL + pathMemo
	if c.mode == modeFriends {
		endpoint = c.apiURL + pathFriends
	}
	tokens := newTokenSource(c, client, store, logger, now)
	tokens.secrets.Add(configTokens...) // never retired: they are in the config
	for _, base := range []string{c.apiURL, c.authURL} {
		if u, err := url.Parse(base); err == nil {
			tokens.secrets.Add(sdk.URLSecrets(u)...)
		}
	}
	snd := &sender{
		cfg:      c,
		client:   client,
		tokens:   tokens,
		endpoint: endpoint,
		now:      now,
	}
	if c.refreshToken != "" {
		// The keeper refreshes ahead of expiry, so a channel idle for months
		// still has live tokens; Close (the SDK calls it when the channel is
		// configured again) stops it.
		kctx, stop := context.WithCancel(context.Background())
		snd.stopKeeper = stop
		tick := p.keepTick
		if tick == 0 {
			tick = keepTick
		}
		go tokens.keep(kctx, tick)
	}
	if c.mode == modeFriends {
		return friendsSender{snd}, nil
	}
	return snd, nil
}

// configSchema documents the channel config (see README.md).
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "notifyd kakao channel config",
  "type": "object",
  "additionalProperties": false,
  "required": ["mode"],
  "properties": {
    "mode":          {"enum": ["memo", "friends", "alimtalk"], "description": "memo: send to the token's own user; friends: send to the recipient (a friend's UUID), 5 per request; alimtalk: send to a phone number through a BizMessage partner"},
    "access_token":  {"type": "string", "description": "memo, friends: user access token; required unless refresh_token is set"},
    "refresh_token": {"type": "string", "description": "memo, friends: refresh token; the plugin refreshes ahead of expiry"},
    "client_id":     {"type": "string", "description": "memo, friends: the app's REST API key; required with refresh_token"},
    "client_secret": {"type": "string", "description": "memo, friends: client secret, if the app enables it"},
    "api_url":       {"type": "string", "format": "uri", "default": "https://kapi.kakao.com"},
    "auth_url":      {"type": "string", "format": "uri", "default": "https://kauth.kakao.com"},
    "template":      {"type": "object", "description": "memo, friends: a Kakao template object; alimtalk: the message's fields (content, title, header, buttons, failover); string values are Go templates over the payload"},
    "timeout":       {"type": "string", "default": "10s", "description": "per HTTP request"},
    "token_file":    {"type": "string", "description": "memo, friends: where refreshed tokens are kept across restarts"},
    "alimtalk": {
      "type": "object",
      "description": "mode alimtalk: the BizMessage partner and its credentials (README, AlimTalk mode)",
      "additionalProperties": false,
      "required": ["partner"],
      "properties": {
        "partner":         {"enum": ["sens", "nhn"], "description": "sens: NAVER Cloud SENS (access_key, secret_key, service_id, channel_id); nhn: NHN Cloud KakaoTalk Bizmessage (app_key, secret_key, sender_key)"},
        "api_url":         {"type": "string", "format": "uri", "description": "the partner's API (default: its public endpoint)"},
        "access_key":      {"type": "string", "description": "sens: the NAVER Cloud access key"},
        "secret_key":      {"type": "string", "description": "sens: the key that signs each request; nhn: sent as X-Secret-Key"},
        "service_id":      {"type": "string", "description": "sens: the Biz Message service id"},
        "channel_id":      {"type": "string", "description": "sens: the KakaoTalk channel id (plusFriendId)"},
        "app_key":         {"type": "string", "description": "nhn: the KakaoTalk Bizmessage appkey"},
        "sender_key":      {"type": "string", "description": "nhn: the sender profile's senderKey"},
        "template_code":   {"type": "string", "description": "the approved template; a message's template_code overrides it"},
        "country_code":    {"type": "string", "default": "82"},
        "max_per_request": {"type": "integer", "minimum": 1, "description": "default and maximum: the partner's (sens 100, nhn 1000)"},
        "confirm":         {"enum": ["delivered", "accepted"], "default": "delivered"},
        "confirm_wait":    {"type": "string", "default": "20s", "description": "at most 5m"},
        "failover": {
          "type": "object", "additionalProperties": false, "required": ["type", "from"],
          "properties": {"type": {"enum": ["SMS", "LMS"]}, "from": {"type": "string", "description": "the registered calling number, digits only"}}
        }
      }
    }
  }
}`

// newTransport is a transport of http.DefaultTransport's settings that reads
// an answer's status line and headers within sdk.MaxHTTPAnswerHeader, as the
// SDK's own client does: net/http's default is 10 MiB, allocated several
// times over while it is parsed (about 67 MB for a 9 MiB header), per request
// in flight. A longer head is a transport error, TRANSIENT.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxResponseHeaderBytes = sdk.MaxHTTPAnswerHeader
	return t
}
