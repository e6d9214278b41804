package sdk_test

import (
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		def     time.Duration
		want    time.Duration
		wantErr string
	}{
		{"empty is the default", "", 30 * time.Second, 30 * time.Second, ""},
		{"seconds", "10s", time.Minute, 10 * time.Second, ""},
		{"compound", "1m30s", time.Minute, 90 * time.Second, ""},
		{"fraction", "1.5s", time.Minute, 1500 * time.Millisecond, ""},
		{"not a duration", "soon", 30 * time.Second, 0, `is "soon", not a duration like 30s or 1m30s`},
		{"bare number", "10", 10 * time.Second, 0, `is "10", not a duration like 10s or 1m30s`},
		{"no default to quote", "soon", 0, 0, `is "soon", not a duration like 10s or 1m30s`},
		{"zero", "0s", time.Second, 0, "is 0s; want a positive duration"},
		{"negative", "-1s", time.Second, 0, "is -1s; want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := sdk.ParseDuration(tt.in, tt.def)
			if gotErr := errText(err); gotErr != tt.wantErr {
				t.Fatalf("ParseDuration(%q, %v) error = %q, want %q", tt.in, tt.def, gotErr, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseDuration(%q, %v) = %v, want %v", tt.in, tt.def, got, tt.want)
			}
		})
	}
}

func TestParseHTTPURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string // the parsed URL, re-encoded
		wantErr string
	}{
		{"http", "http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook", ""},
		{"https with query", "https://example.com/a?b=c", "https://example.com/a?b=c", ""},
		{"scheme in capitals", "HTTPS://example.com", "https://example.com", ""},
		{"unparsable", "http://[::1", "", "is not a valid URL"},
		{"control character", "http://example.com/\n", "", "is not a valid URL"},
		{"empty", "", "", "must be an http:// or https:// URL"},
		{"relative", "example.com/hook", "", "must be an http:// or https:// URL"},
		{"other scheme", "ftp://example.com/x", "", "must be an http:// or https:// URL"},
		{"no host", "http:///path", "", "has no host"},
		// A port but no host name: net/http and fasthttp dial ":8080",
		// which is this machine.
		{"port without a host", "http://:8080/path", "", "has no host"},
		{"user info and port without a host", "http://u@:8080/path", "", "has no host"},
		// url.Parse takes any run of digits for a port, and an empty one.
		{"port past 65535", "http://127.0.0.1:99999/in", "", "has port 99999, not one of 1-65535"},
		{"port 0", "http://127.0.0.1:0/in", "", "has port 0, not one of 1-65535"},
		{"port of many digits", "http://127.0.0.1:184467440737095516160/in", "", "has a port of 21 digits, not one of 1-65535"},
		{"empty port", "http://127.0.0.1:/in", "", `has an empty port (a ":" with no number after it)`},
		{"empty port after IPv6", "http://[::1]:/in", "", `has an empty port (a ":" with no number after it)`},
		{"port 65535", "http://127.0.0.1:65535/in", "http://127.0.0.1:65535/in", ""},
		{"port 1 with zeros", "http://[::1]:0001/in", "http://[::1]:0001/in", ""},
		// The request line carries the query as written: a space splits it.
		{"space in the query", "http://127.0.0.1/in?name=my hook", "", "has a space in its query, which would split the request line: write it as %20"},
		{"space in the path", "http://127.0.0.1/my hook", "http://127.0.0.1/my%20hook", ""},
		{"space in the fragment", "http://127.0.0.1/in#my hook", "http://127.0.0.1/in#my%20hook", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := sdk.ParseHTTPURL(tt.in)
			if gotErr := errText(err); gotErr != tt.wantErr {
				t.Fatalf("ParseHTTPURL(%q) error = %q, want %q", tt.in, gotErr, tt.wantErr)
			}
			if err != nil {
				if u != nil {
					t.Errorf("ParseHTTPURL(%q) = %v with an error, want nil", tt.in, u)
				}
				return
			}
			if got := u.String(); got != tt.want {
				t.Errorf("ParseHTTPURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseHTTPURL_errorOmitsURL(t *testing.T) {
	t.Parallel()
	// A URL may carry credentials; an error shown to the operator must not.
	for _, raw := range []string{"ftp://user:hunter2@example.com", "http://user:hunter2@", "http://user:hunter2@[::1"} {
		_, err := sdk.ParseHTTPURL(raw)
		if err == nil {
			t.Fatalf("ParseHTTPURL(%q) = nil error, want one", raw)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseHTTPURL(%q) error = %q, want it without the password", raw, err)
		}
	}
}

func TestParseHeader(t *testing.T) {
	t.Parallel()
	reserved := []string{"Content-Type", "Webhook-Id"}
	tests := []struct {
		name, header, value string
		want                string // canonical name
		wantErr             string
	}{
		{"plain", "X-Tenant", "acme", "X-Tenant", ""},
		{"canonicalised", "x-tenant", "acme", "X-Tenant", ""},
		{"token punctuation", "X_Odd!#$%&'*+.^`|~", "v", "X_odd!#$%&'*+.^`|~", ""},
		{"tab and high bytes in value", "X-A", "a\tb é", "X-A", ""},
		{"empty value", "X-A", "", "X-A", ""},
		{"empty name", "", "v", "", "is not a valid header name"},
		{"space in name", "X Bad", "v", "", "is not a valid header name"},
		{"colon in name", "X-A:", "v", "", "is not a valid header name"},
		{"non-ASCII name", "X-Ä", "v", "", "is not a valid header name"},
		{"reserved", "Content-Type", "text/plain", "", "is set by the plugin itself and cannot be overridden"},
		{"reserved in other case", "webhook-id", "x", "", "is set by the plugin itself and cannot be overridden"},
		{"CRLF in value", "X-A", "a\r\nX-B: b", "", "contains characters not allowed in a header value"},
		{"NUL in value", "X-A", "a\x00", "", "contains characters not allowed in a header value"},
		{"DEL in value", "X-A", "a\x7f", "", "contains characters not allowed in a header value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := sdk.ParseHeader(tt.header, tt.value, reserved...)
			if gotErr := errText(err); gotErr != tt.wantErr {
				t.Fatalf("ParseHeader(%q, %q) error = %q, want %q", tt.header, tt.value, gotErr, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseHeader(%q, %q) = %q, want %q", tt.header, tt.value, got, tt.want)
			}
		})
	}
}

func TestCheckHeaderValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		wantErr  string
	}{
		{"token", "pa-9f8e7d6c", ""},
		{"spaces and tab", "Bearer a\tb", ""},
		{"LF", "key\n", "contains characters not allowed in a header value"},
		{"CR", "key\rX-Evil: 1", "contains characters not allowed in a header value"},
		{"DEL", "\x7f", "contains characters not allowed in a header value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := errText(sdk.CheckHeaderValue(tt.in)); got != tt.wantErr {
				t.Errorf("CheckHeaderValue(%q) error = %q, want %q", tt.in, got, tt.wantErr)
			}
		})
	}
}

// errText is err's message, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
