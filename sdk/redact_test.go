package sdk_test

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

func TestRedactor_Redact(t *testing.T) {
	t.Parallel()

	t.Run("added secrets, their JSON-escaped form, extras", func(t *testing.T) {
		t.Parallel()
		var r sdk.Redactor
		r.Add("tok-123456", `pa"ss<word>`, "short")
		got := r.Redact(`got tok-123456 and {"p":"pa\"ss\u003cword\u003e"} and short and rec-secret-9`, "rec-secret-9")
		for _, leak := range []string{"tok-123456", `pa\"ss\u003cword\u003e`, "rec-secret-9"} {
			if strings.Contains(got, leak) {
				t.Errorf("Redact left %q in %q", leak, got)
			}
		}
		if !strings.Contains(got, "short") {
			t.Errorf("Redact(%q): a value under MinSecretLen is ordinary text, want it kept", got)
		}
	})

	t.Run("a secret containing another is replaced whole", func(t *testing.T) {
		t.Parallel()
		var r sdk.Redactor
		r.Add("abcdef", "abcdefghijkl")
		if got := r.Redact("x abcdefghijkl y"); got != "x [redacted] y" {
			t.Errorf("got %q, want %q", got, "x [redacted] y")
		}
	})

	t.Run("retired secrets stay redacted, in-use ones are never forgotten", func(t *testing.T) {
		t.Parallel()
		var r sdk.Redactor
		r.Add("config-token-0", "client-secret")
		r.Add("config-token-0") // also the current token
		for i := 1; i <= sdk.MaxRetiredSecrets+10; i++ {
			r.Add(fmt.Sprintf("rotated-token-%d", i))
			if i == 1 {
				r.Retire("config-token-0") // stops being current, stays configured
			} else {
				r.Retire(fmt.Sprintf("rotated-token-%d", i-1))
			}
		}
		last := fmt.Sprintf("rotated-token-%d", sdk.MaxRetiredSecrets+10)
		for _, s := range []string{"config-token-0", "client-secret", last, "rotated-token-20", fmt.Sprintf("rotated-token-%d", sdk.MaxRetiredSecrets+9)} {
			if got := r.Redact("[" + s + "]"); got != "[[redacted]]" {
				t.Errorf("Redact(%q) = %q; want it redacted", s, got)
			}
		}
		// Past the bound, the oldest retired are forgotten.
		if got := r.Redact("[rotated-token-2]"); got != "[rotated-token-2]" {
			t.Errorf("Redact = %q; want the oldest of more than %d retired forgotten", got, sdk.MaxRetiredSecrets)
		}
	})

	t.Run("nil Redactor redacts extras only", func(t *testing.T) {
		t.Parallel()
		var r *sdk.Redactor
		if got := r.Redact("a secret-value b", "secret-value"); got != "a [redacted] b" {
			t.Errorf("got %q", got)
		}
	})
}

func TestURLSecrets(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("https://alice-user:p%40ss-word@hooks.example/x?token=t0k%2Bvalue&bare-secret-value&flag=")
	if err != nil {
		t.Fatal(err)
	}
	var r sdk.Redactor
	r.Add(sdk.URLSecrets(u)...)
	basic := base64.StdEncoding.EncodeToString([]byte("alice-user:p@ss-word"))
	echo := "seen alice-user p@ss-word p%40ss-word t0k%2Bvalue t0k+value bare-secret-value Basic " + basic
	if got := r.Redact(echo); strings.Count(got, sdk.Redacted) != 7 {
		t.Errorf("Redact(%q) = %q; want all 7 credentials redacted", echo, got)
	}
}

func TestHeaderSecrets(t *testing.T) {
	t.Parallel()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("webuser:hunter2-pw"))
	for value, echo := range map[string]string{
		"Bearer sk-live-abcdef":  "invalid token sk-live-abcdef",
		"sk-live-abcdef":         "key sk-live-abcdef rejected",
		basic:                    "bad password hunter2-pw",
		"Token tok=abc.def-9876": "token tok=abc.def-9876",
	} {
		var r sdk.Redactor
		r.Add(sdk.HeaderSecrets(value)...)
		if got := r.Redact(echo); !strings.Contains(got, sdk.Redacted) {
			t.Errorf("header %q: Redact(%q) = %q, want the credential redacted", value, echo, got)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://user:pa55word@hook.example/p?token=s3cret&x=1#frag": "https://user:xxxxx@hook.example/p?token=xxxxx&x=xxxxx",
		"https://tok3n@hook.example/p":                               "https://xxxxx@hook.example/p",
		"https://hook.example/p?baresecret":                          "https://hook.example/p?xxxxx",
		"postgres://app:pw@db:5432/notifyd?sslmode=disable":          "postgres://app:xxxxx@db:5432/notifyd?sslmode=xxxxx",
		"https://hook.example/p":                                     "https://hook.example/p",
		"mailto:secret@example.com":                                  "mailto:xxxxx",
		"https://user:pa55word@hook.example/%zz":                     "(unparsable URL)",
	} {
		if got := sdk.RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestRedactor_Redact_cutText(t *testing.T) {
	t.Parallel()
	var r sdk.Redactor
	r.Add("Bearer-tok-0123456789")
	// A body quoted up to ClassifyBodyPrefix bytes may end inside a secret.
	body := strings.Repeat("x", sdk.ClassifyBodyPrefix-8) + " Bearer-tok-0123456789 rest"
	v := sdk.ClassifyStatus(400, "", []byte(body))
	got := r.Redact(v.Detail)
	if strings.Contains(got, "Bearer-t") || !strings.HasSuffix(got, sdk.Redacted+"…") {
		t.Errorf("Redact(…%q) = …%q; want the cut start of the secret redacted", v.Detail[len(v.Detail)-20:], got[len(got)-20:])
	}
	// Uncut text keeps a word that merely starts like a secret.
	if got := r.Redact("see Bear"); got != "see Bear" {
		t.Errorf("Redact(%q) = %q; only text cut with … loses a partial secret", "see Bear", got)
	}
}

func TestRedactURLs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`parse "redis://u:rdpw-1@127.0.0.1:6379/%zz?client_name=q": invalid URL escape "%zz"`: `parse "(unparsable URL)": invalid URL escape "%zz"`,
		"cannot parse `postgres://app:pw@h/db?sslkey=k`: bad":                                 "cannot parse `postgres://app:xxxxx@h/db?sslkey=xxxxx`: bad",
		`time: invalid duration "https://tok3n@h/x"`:                                          `time: invalid duration "https://xxxxx@h/x"`,
		"dial tcp 127.0.0.1:1: connection refused":                                            "dial tcp 127.0.0.1:1: connection refused",
		"see https://docs.example/x for help":                                                 "see https://docs.example/x for help",
	} {
		if got := sdk.RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// A provider echoing the request inside a JSON or string literal escapes a
// secret its own way: PHP's json_encode writes "/" as "\/", Python's
// json.dumps writes every non-ASCII character (and a surrogate pair for one
// past U+FFFF) as \uXXXX, JavaScript's JSON.stringify leaves "<", ">" and
// "&" alone where Go's encoder writes \u003c. Only Go's own form was known:
// a Basic credential with a "/" (one base64 character in 64) came back in
// the detail whole, a backslash inside it.
func TestRedactor_Redact_escapedEcho(t *testing.T) {
	t.Parallel()
	for secret, echo := range map[string]string{
		"aG9vazpwYXNzPz4/":          `{"HTTP_AUTHORIZATION":"Basic aG9vazpwYXNzPz4\/"}`,
		"dTo/Pz4+Pz8=":              `{"h":"dTo\/Pz4+Pz8="}`,
		"pässwort-123":              `{"pw":"p\u00e4sswort-123"}`,
		"PÄSSWORT-123":              `{"pw":"P\u00C4SSWORT-123"}`,
		"tok-😀-123456":              `{"k":"tok-\ud83d\ude00-123456"}`,
		`key&value"<x>`:             `{"k":"key&value\"<x>"}`,
		`back\slash-secret`:         `["back\\slash-secret"]`,
		"tab\tsecret-value":         `"tab\tsecret-value"`,
		"api-key/with/slash-s3cr3t": `repr: 'api-key\/with\/slash-s3cr3t', again \x61pi-key/with/slash-s3cr3t`,
	} {
		var r sdk.Redactor
		r.Add(secret)
		got := r.Redact("answer: " + echo + " end")
		if !strings.Contains(got, sdk.Redacted) || !strings.HasPrefix(got, "answer: ") || !strings.HasSuffix(got, " end") {
			t.Errorf("secret %q: Redact(%q) = %q; want the escaped secret redacted, the rest kept", secret, echo, got)
		}
		for _, part := range []string{"aG9vazpw", "dTo", "sswort", "SSWORT", "tok-", "key&", "slash-se", "secret-value", "api-key"} {
			if strings.Contains(got, part) {
				t.Errorf("secret %q: Redact(%q) = %q; it still holds %q", secret, echo, got, part)
			}
		}
	}
	// Escapes that spell no secret are left as they are.
	var r sdk.Redactor
	r.Add("aG9vazpwYXNzPz4/")
	if in := `{"path":"\/v1\/send","x":"\u00e4\\"}`; r.Redact(in) != in {
		t.Errorf("Redact(%q) = %q; want it unchanged", in, r.Redact(in))
	}
	// A quote cut inside an escaped secret loses its start too.
	r.Add("dTo/Pz4+Pz8=")
	if in, want := `{"h":"dTo\/Pz4…`, `{"h":"`+sdk.Redacted+"…"; r.Redact(in) != want {
		t.Errorf("Redact(%q) = %q; want %q", in, r.Redact(in), want)
	}
}
