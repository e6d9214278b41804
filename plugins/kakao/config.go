package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// Defaults for the optional config keys.
const (
	APIURLDefault  = "https://kapi.kakao.com"
	AuthURLDefault = "https://kauth.kakao.com"
	TimeoutDefault = 10 * time.Second
)

// Modes: who receives the message.
const (
	modeMemo     = "memo"     // the token's own user ("send to me")
	modeFriends  = "friends"  // the notification's recipient, a friend's UUID
	modeAlimtalk = "alimtalk" // a phone number, through a BizMessage partner
)

// rawConfig is the channel's `config:` block exactly as the operator wrote it.
type rawConfig struct {
	Mode         string          `json:"mode"`
	AccessToken  string          `json:"access_token"`
	RefreshToken string          `json:"refresh_token"`
	ClientID     string          `json:"client_id"`
	ClientSecret string          `json:"client_secret"`
	APIURL       string          `json:"api_url"`
	AuthURL      string          `json:"auth_url"`
	Template     json.RawMessage `json:"template"`
	Timeout      string          `json:"timeout"`
	TokenFile    string          `json:"token_file"`
	Alimtalk     *alimtalkRaw    `json:"alimtalk"`
}

// config is a validated channel config with defaults filled in.
type config struct {
	mode         string
	accessToken  string
	refreshToken string
	clientID     string
	clientSecret string
	apiURL       string // no trailing slash
	authURL      string // no trailing slash
	template     *fieldTemplate
	timeout      time.Duration
	tokenFile    string
	alimtalk     *atConfig // mode alimtalk only
}

// ConfigError is a bad channel config: Key names the offending key. It never
// carries a secret's value.
type ConfigError struct {
	Key    string
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("config.%s: %s", e.Key, e.Reason) }

// parseConfig decodes (strictly: an unknown key is an error, so a typo never
// silently falls back to a default) and validates one channel's config.
func parseConfig(req sdk.ConfigureRequest) (*config, error) {
	var rc rawConfig
	if err := req.Decode(&rc); err != nil {
		return nil, err
	}

	c := &config{
		mode:         rc.Mode,
		accessToken:  rc.AccessToken,
		refreshToken: rc.RefreshToken,
		clientID:     rc.ClientID,
		clientSecret: rc.ClientSecret,
		tokenFile:    rc.TokenFile,
	}
	switch rc.Mode {
	case modeMemo, modeFriends:
		if rc.Alimtalk != nil {
			return nil, &ConfigError{Key: "alimtalk", Reason: "only used with mode alimtalk"}
		}
	case modeAlimtalk:
		return parseAlimtalkConfig(rc)
	case "":
		return nil, &ConfigError{Key: "mode", Reason: `required: "memo" (send to me), "friends" (send to the recipient's UUID) or "alimtalk" (send to a phone number through a BizMessage partner)`}
	default:
		return nil, &ConfigError{Key: "mode", Reason: fmt.Sprintf(`%q is not "memo", "friends" or "alimtalk"`, rc.Mode)}
	}
	if rc.AccessToken == "" && rc.RefreshToken == "" {
		return nil, &ConfigError{Key: "access_token", Reason: "required unless refresh_token (with client_id) is set"}
	}
	if rc.RefreshToken != "" && rc.ClientID == "" {
		return nil, &ConfigError{Key: "client_id", Reason: "required with refresh_token: the app's REST API key, sent when refreshing the access token"}
	}
	if rc.ClientSecret != "" && rc.RefreshToken == "" {
		return nil, &ConfigError{Key: "client_secret", Reason: "only used to refresh the access token, so it needs refresh_token"}
	}
	if rc.TokenFile != "" && rc.RefreshToken == "" {
		return nil, &ConfigError{Key: "token_file", Reason: "keeps refreshed tokens, so it needs refresh_token"}
	}
	for _, s := range []struct{ key, val string }{
		{"access_token", rc.AccessToken}, {"refresh_token", rc.RefreshToken},
		{"client_id", rc.ClientID}, {"client_secret", rc.ClientSecret},
	} {
		if strings.ContainsAny(s.val, " \t\r\n") {
			return nil, &ConfigError{Key: s.key, Reason: "contains whitespace (a copy-paste accident?)"}
		}
	}
	var err error
	if c.apiURL, err = baseURL("api_url", rc.APIURL, APIURLDefault); err != nil {
		return nil, err
	}
	if c.authURL, err = baseURL("auth_url", rc.AuthURL, AuthURLDefault); err != nil {
		return nil, err
	}
	if c.timeout, err = sdk.ParseDuration(rc.Timeout, TimeoutDefault); err != nil {
		return nil, &ConfigError{Key: "timeout", Reason: fmt.Sprintf("%q is not a positive duration such as \"10s\"", rc.Timeout)}
	}
	if t := bytes.TrimSpace(rc.Template); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if c.template, err = parseFieldTemplate(t); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// baseURL validates an absolute http(s) base URL, or returns def when empty.
func baseURL(key, val, def string) (string, error) {
	if val == "" {
		return def, nil
	}
	u, err := sdk.ParseHTTPURL(val)
	if err != nil {
		// The reason says what is wrong (a port, no host, the scheme) and
		// never repeats the URL, shown here without its credentials.
		return "", &ConfigError{Key: key, Reason: fmt.Sprintf("%q %v", sdk.RedactURL(val), err)}
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", &ConfigError{Key: key, Reason: fmt.Sprintf("%q must be a base URL without query or fragment", sdk.RedactURL(val))}
	}
	return strings.TrimRight(val, "/"), nil
}

// parseAlimtalkConfig validates a mode alimtalk config: the Talk Message
// keys (OAuth tokens, Kakao's URLs) do not apply and are refused, so a
// half-switched config never looks like it works.
func parseAlimtalkConfig(rc rawConfig) (*config, error) {
	for _, k := range []struct{ key, val string }{
		{"access_token", rc.AccessToken}, {"refresh_token", rc.RefreshToken}, {"client_id", rc.ClientID},
		{"client_secret", rc.ClientSecret}, {"token_file", rc.TokenFile}, {"api_url", rc.APIURL}, {"auth_url", rc.AuthURL},
	} {
		if k.val != "" {
			return nil, &ConfigError{Key: k.key, Reason: "not used with mode alimtalk (a BizMessage partner takes its credentials in the alimtalk block, e.g. alimtalk.secret_key; its URL is alimtalk.api_url)"}
		}
	}
	at, err := parseAlimtalk(rc.Alimtalk)
	if err != nil {
		return nil, err
	}
	c := &config{mode: modeAlimtalk, alimtalk: at}
	if c.timeout, err = sdk.ParseDuration(rc.Timeout, TimeoutDefault); err != nil {
		return nil, &ConfigError{Key: "timeout", Reason: fmt.Sprintf("%q is not a positive duration such as \"10s\"", rc.Timeout)}
	}
	if t := bytes.TrimSpace(rc.Template); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if c.template, err = parseObjectTemplate(t); err != nil {
			return nil, err
		}
	}
	return c, nil
}
