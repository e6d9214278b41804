package sdk

import (
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Checks for the values a channel config most often carries: durations,
// endpoint URLs and static HTTP headers. Every HTTP plugin needs them, and
// they had been copied from plugin to plugin; here they are written, tested
// and worded once.
//
// The errors they return are reasons written to follow the key's name, so a
// plugin keeps its own prefix and names the key itself:
//
//	d, err := sdk.ParseDuration(cfg.Timeout, 10*time.Second)
//	if err != nil {
//		return nil, fmt.Errorf("myplugin config: timeout %v", err) // "timeout is \"soon\", not a duration like 10s or 1m30s"
//	}
//
// No error repeats a URL or header value, which may carry a credential.

// Reasons returned by ParseHTTPURL and ParseHeader.
var (
	errNotURL         = errors.New("is not a valid URL")
	errNotHTTPURL     = errors.New("must be an http:// or https:// URL")
	errNoHost         = errors.New("has no host")
	errEmptyPort      = errors.New(`has an empty port (a ":" with no number after it)`)
	errSpaceInQuery   = errors.New("has a space in its query, which would split the request line: write it as %20")
	errHeaderName     = errors.New("is not a valid header name")
	errHeaderReserved = errors.New("is set by the plugin itself and cannot be overridden")
	errHeaderValue    = errors.New("contains characters not allowed in a header value")
)

// ParseDuration reads a Go duration ("10s", "1m30s") from a config string;
// empty means def. Zero and negative durations are errors: a timeout or
// interval of zero is always a mistake, never "no limit". The error quotes
// def as the example, so the operator sees the default's shape.
func ParseDuration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		example := "10s"
		if def > 0 {
			example = def.String()
		}
		return 0, fmt.Errorf("is %q, not a duration like %s or 1m30s", s, example)
	}
	if d <= 0 {
		return 0, fmt.Errorf("is %s; want a positive duration", s)
	}
	return d, nil
}

// ParseHTTPURL parses an absolute http:// or https:// URL with a host: what
// a plugin can POST to. A relative URL or another scheme would only fail
// later, at the first send, so it is refused while configuring. So is what
// url.Parse lets through and no request can be sent to as written: no host
// name before a port ("http://:8080/", which dials this machine), a port
// outside 1-65535 or an empty one (net/http dials port 80 for "h:", fasthttp
// port 0), and a space in the query, which the request line carries as it
// is and which splits it. A space in the path or fragment is fine: it is
// escaped when the URL is written.
func ParseHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errNotURL
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errNotHTTPURL
	}
	if u.Hostname() == "" {
		return nil, errNoHost
	}
	if p := u.Port(); p != "" {
		if len(p) > 5 {
			return nil, fmt.Errorf("has a port of %d digits, not one of 1-65535", len(p))
		}
		if n, _ := strconv.Atoi(p); n < 1 || n > 65535 {
			return nil, fmt.Errorf("has port %s, not one of 1-65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, errEmptyPort
	}
	if strings.Contains(u.RawQuery, " ") {
		return nil, errSpaceInQuery
	}
	return u, nil
}

// ParseHeader checks one static header a channel config adds to every
// request and returns its canonical name. The name must be an RFC 9110
// token and not one of reserved (the headers the plugin sets itself, in any
// case); the value must hold no control character but tab, since a CR or LF
// would let a config inject headers.
func ParseHeader(name, value string, reserved ...string) (string, error) {
	if !validHeaderName(name) {
		return "", errHeaderName
	}
	canon := textproto.CanonicalMIMEHeaderKey(name)
	for _, r := range reserved {
		if strings.EqualFold(canon, r) {
			return "", errHeaderReserved
		}
	}
	if err := CheckHeaderValue(value); err != nil {
		return "", err
	}
	return canon, nil
}

// CheckHeaderValue checks a config value the plugin sends as (part of) a
// header, such as an API key or a User-Agent: a control character in it
// would corrupt the request or inject a header.
func CheckHeaderValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return errHeaderValue
		}
	}
	return nil
}

// validHeaderName reports whether name is a token (RFC 9110 §5.6.2).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
