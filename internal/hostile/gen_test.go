package hostile

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
)

// gen makes hostile requests from a seeded source: the same seed makes the
// same requests.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) *gen { return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

// request is one hostile call. want, when set, is what the answer must be:
// "2xx", or "4xx:<text the message must contain>".
type request struct {
	method, target string
	body           []byte
	want           string
}

// The bounds the edges probe (docs/config.md, "Bounds").
const (
	recipientBound = 1024
	keyBound       = 512
	channelBound   = 200
	payloadBound   = 256 << 10
	batchBound     = 1000
	reasonBound    = 1024
)

func note(channel, recipient, payload, extra string) string {
	return `{"channel":"` + channel + `","recipient":"` + recipient + `","payload":` + payload + extra + `}`
}

func post(body string, want string) request {
	return request{"POST", "/v1/notifications", []byte(body), want}
}

// payloadOf is a payload of exactly n bytes.
func payloadOf(n int) string {
	return `{"t":"` + strings.Repeat("p", n-len(`{"t":""}`)) + `"}`
}

// batchOf is a batch of n ordinary notifications.
func batchOf(n int, prefix string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = note("hooks", fmt.Sprintf("%s-%d", prefix, i), `{"text":"bulk"}`, "")
	}
	return `{"notifications":[` + strings.Join(items, ",") + `]}`
}

// edges are the requests at and just past every bound, and one of each
// kind of broken encoding, each with the answer it must get. Each seed
// varies their recipients and keys so runs do not collide.
func (g *gen) edges() []request {
	u := strconv.FormatUint(g.r.Uint64(), 36)
	hangul := strings.Repeat("한", recipientBound/3) // 1,023 bytes
	return []request{
		post(note("hooks", strings.Repeat("r", recipientBound), `{}`, ""), "2xx"),
		post(note("hooks", strings.Repeat("r", recipientBound+1), `{}`, ""), "4xx:recipient"),
		post(note("hooks", hangul+"r", `{}`, ""), "2xx"),
		post(note("hooks", hangul+"한", `{}`, ""), "4xx:recipient"), // 1,026 bytes, 342 characters
		post(note("hooks", "key-"+u, `{}`, `,"idempotency_key":"`+u+strings.Repeat("k", keyBound-len(u))+`"`), "2xx"),
		post(note("hooks", "key-"+u, `{}`, `,"idempotency_key":"`+u+strings.Repeat("k", keyBound+1-len(u))+`"`), "4xx:idempotency_key"),
		post(note(strings.Repeat("c", channelBound), "u", `{}`, ""), "4xx:channel"),
		post(note(strings.Repeat("c", channelBound+1), "u", `{}`, ""), "4xx:channel"),
		post(note("hooks", "payload-at-bound-"+u, payloadOf(payloadBound), ""), "2xx"),
		post(note("hooks", "payload-past-bound-"+u, payloadOf(payloadBound+1), ""), "4xx:payload"),
		post(batchOf(batchBound, "batch-"+u), "2xx"),
		post(batchOf(batchBound+1, "batch-"+u), "4xx:notifications"),
		post(note("hooks", "dup-"+u, `{}`, `,"idempotency_key":"dup-`+u+`"`), "2xx"),
		post(note("hooks", "dup-"+u, `{}`, `,"idempotency_key":"dup-`+u+`"`), "2xx"), // the original's id
		post(note("hooks", `a\u0000b`, `{}`, ""), "4xx:recipient"),
		post(note("hooks", "a\x00b", `{}`, ""), "4xx:"), // a raw NUL is not JSON
		post(note("hooks", "a\xff\xfeb", `{}`, ""), "4xx:"),
		post(note("hooks", `\ud800`, `{}`, ""), "4xx:"),
		post(note("hooks", "u", `{"t":"a\u0000b"}`, ""), "4xx:payload"),
		post(note("hooks", "u", "{\"t\":\"a\xffb\"}", ""), "4xx:"),
		post(note("hooks", "u", `{"t":"`+`\udc00"}`, ""), "4xx:"),
		post(note("nope", "u", `{}`, ""), "4xx:channel"),
		post(note("hooks", "u", `{}`, `,"idempotency_key":"k\u0000"`), "4xx:idempotency_key"),
		post(`{"channel":1,"recipient":"u","payload":{}}`, "4xx:channel"),
		post(`{"channel":"hooks","recipient":["u"],"payload":{}}`, "4xx:recipient"),
		post(`{"channel":"hooks","recipient":"u"}`, "4xx:payload"),
		post(`{"channel":"hooks","recipient":"u","payload":null}`, "4xx:payload"),
		post(`{"notifications":[]}`, "4xx:notifications"),
		post(`{"notifications":{}}`, "4xx:notifications"),
		post(`[]`, "4xx:"),
		post(``, "4xx:"),
		post(`{"channel":"hooks","recipient":"u","payload":{},"send_at":"yesterday"}`, "4xx:send_at"),
		post(note("hooks", "u", `{"n":1e999999}`, ""), "4xx:payload"),
		post(note("hooks", "u", `{"n":-1e-999999}`, ""), "4xx:payload"),
		post(note("hooks", "u", `{"n":123456789012345678901234567890123456789}`, ""), ""),
		post(note("hooks", "u", nested(1000), ""), ""),
		post(note("hooks", "u", nested(9000), ""), ""),
		post(note("hooks", "u", nested(20000), ""), ""),
		{"GET", "/v1/notifications/-1", nil, "4xx:"},
		{"GET", "/v1/notifications/0", nil, "4xx:"},
		{"GET", "/v1/notifications/9223372036854775807", nil, "4xx:"},
		{"GET", "/v1/notifications/99999999999999999999", nil, "4xx:"},
		{"GET", "/v1/notifications/abc", nil, "4xx:"},
		{"GET", "/v1/notifications/%00", nil, "4xx:"},
		{"GET", "/v1/notifications/\xff", nil, "4xx:"},
		{"POST", "/v1/notifications/-1/cancel", nil, "4xx:"},
		{"POST", "/v1/notifications/99999999999999999999/cancel", nil, "4xx:"},
		{"GET", "/v1/dlq?channel=\xff", nil, "4xx:"},
		{"GET", "/v1/dlq?channel=%00", nil, "4xx:"},
		{"GET", "/v1/dlq?channel=%FF%FE", nil, "4xx:"},
		{"GET", "/v1/dlq?limit=-5", nil, "4xx:limit"},
		{"GET", "/v1/dlq?limit=99999999999999999999", nil, "4xx:limit"},
		{"GET", "/v1/dlq?after=-1", nil, "4xx:after"},
		{"GET", "/v1/dlq?channel=" + strings.Repeat("q", 5000), nil, ""},
		{"POST", "/v1/dlq/replay", []byte(`{"channel":"a\u0000"}`), "4xx:channel"},
		{"POST", "/v1/dlq/purge", []byte(`{"ids":[-1]}`), "4xx:"},
		{"POST", "/v1/channels/hooks/pause", []byte(`{"reason":"` + strings.Repeat("p", reasonBound) + `"}`), "2xx"},
		{"POST", "/v1/channels/hooks/resume", nil, "2xx"},
		{"POST", "/v1/channels/hooks/pause", []byte(`{"reason":"` + strings.Repeat("p", reasonBound+1) + `"}`), "4xx:reason"},
		{"POST", "/v1/channels/hooks/pause", []byte(`{"reason":"a\u0000"}`), "4xx:reason"},
		{"POST", "/v1/channels/hooks/pause", []byte("{\"reason\":\"a\xff\"}"), "4xx:"},
		{"POST", "/v1/channels/%00/pause", nil, "4xx:"},
		{"POST", "/v1/channels/\xff/pause", nil, "4xx:"},
		{"POST", "/v1/channels/hooks/resume", nil, "2xx"},
		{"PUT", "/v1/subscribers/" + strings.Repeat("s", 256), []byte(`{"addresses":{"hooks":"a"}}`), "2xx"},
		{"PUT", "/v1/subscribers/" + strings.Repeat("s", 257), []byte(`{"addresses":{"hooks":"a"}}`), "4xx:"},
		{"PUT", "/v1/subscribers/%00", []byte(`{}`), "4xx:"},
		{"PUT", "/v1/subscribers/\xff", []byte(`{}`), "4xx:"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"addresses":{"hooks":"` + strings.Repeat("a", recipientBound) + `"}}`), "2xx"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"addresses":{"hooks":"` + strings.Repeat("a", recipientBound+1) + `"}}`), "4xx:address"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"attributes":{"d":` + nested(40) + `}}`), "4xx:attributes"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"attributes":{"big":"` + strings.Repeat("b", 70<<10) + `"}}`), "4xx:attributes"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"attributes":{"k\u0000":1}}`), "4xx:attributes"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"topics":["` + strings.Repeat("t", 3200) + `"]}`), "4xx:topic"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"topics":[` + strings.Repeat(`"t",`, 20000) + `"t"]}`), ""},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"addresses":{"` + strings.Repeat("c", 3200) + `":"a"}}`), "4xx:"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"external_id":"other","addresses":{"hooks":"a"}}`), "4xx:external_id"},
		{"PUT", "/v1/subscribers/edge-" + u, []byte(`{"addresses":{"hooks":""}}`), "4xx:address"},
		{"GET", "/v1/subscribers/%00", nil, "4xx:"},
		{"DELETE", "/v1/subscribers/\xff", nil, "4xx:"},
		{"GET", "/v1/jobs?state=BOGUS", nil, "4xx:state"},
		{"GET", "/v1/jobs?limit=0", nil, "4xx:limit"},
		{"GET", "/v1/jobs?kind=%00", nil, "4xx:kind"},
		{"GET", "/v1/jobs/-1", nil, "4xx:"},
		{"GET", "/v1/jobs/99999999999999999999", nil, "4xx:"},
		{"POST", "/v1/campaigns", []byte(`{"channel":"nope","audience":{"topic":"t"},"payload":{}}`), "4xx:channel"},
		{"POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"t"},"payload":{"x":"{{"}}`), "4xx:payload"},
		{"POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"query":"SELECT 1"},"payload":{}}`), "4xx:"},
		{"POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"` + strings.Repeat("t", 3200) + `"},"payload":{}}`), "4xx:topic"},
		{"POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"t\u0000"},"payload":{}}`), "4xx:topic"},
		{"POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"t"},"payload":{"x":"` + strings.Repeat("{{.recipient}}", 5000) + `"}}`), "4xx:payload"},
		{"POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"t"},"payload":[1]}`), "4xx:payload"},
		{"GET", "/v1/jobs?schedule=" + strings.Repeat("s", 3200), nil, ""},
		{"POST", "/v1/schedules/" + strings.Repeat("s", 3200) + "/run", nil, "4xx:"},
		{"POST", "/v1/schedules/%00/run", nil, "4xx:"},
		{"POST", "/v1/dlq/replay", []byte(`{"ids":[` + strings.Repeat("1,", batchBound) + `1]}`), "4xx:ids"},
		{"POST", "/v1/dlq/replay", []byte(`{"ids":[1e999]}`), "4xx:ids"},
		{"DELETE", "/v1/notifications", nil, "4xx:"},
	}
}

// nested is a JSON value n arrays deep.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// text is a JSON string's inside: ordinary, at or past a bound, or broken.
func (g *gen) text(bound int) string {
	switch g.r.IntN(18) {
	case 0:
		return strings.Repeat("a", bound) // at the bound
	case 1:
		return strings.Repeat("b", bound+1) // just past it
	case 2:
		return `x\u0000y` // NUL
	case 3:
		return "x\xff\xfey" // invalid UTF-8, raw
	case 4:
		return `\ud800` // a lone surrogate
	case 5:
		return strings.Repeat("한", bound/3+1) // multi-byte, past the bound in bytes
	case 6:
		return ""
	case 7:
		return `quote\" and \\ backslash`
	case 8:
		return "raw\x00nul"
	default:
		return fmt.Sprintf("user-%d", g.r.IntN(1000))
	}
}

func (g *gen) channel() string {
	switch g.r.IntN(8) {
	case 0:
		return g.text(channelBound)
	case 1:
		return "nope"
	case 2:
		return "refused"
	default:
		return "hooks"
	}
}

// value is a JSON value: nested, large, odd numbers, wrong types.
func (g *gen) value(depth int) string {
	if depth > 3 {
		return `1`
	}
	switch g.r.IntN(16) {
	case 0:
		return nested([]int{200, 2000, 12000}[g.r.IntN(3)])
	case 1:
		return g.pick(`1e999999`, `-1e999999`, `1e-999999`, `123456789012345678901234567890`, `0.1e400`)
	case 2:
		return `-0.0000000000000000000000000001`
	case 3:
		return `"` + g.text(100) + `"`
	case 4:
		return `{"a":` + g.value(depth+1) + `,"b":[` + g.value(depth+1) + `]}`
	case 5:
		return payloadOf(payloadBound - 1 + g.r.IntN(3)) // at or about the payload bound
	case 6:
		return `null`
	case 7:
		return `"{{.data.missing}}"`
	case 8:
		return `{"k\u0000":1}`
	default:
		return `{"text":"hello"}`
	}
}

func (g *gen) notification() string {
	fields := []string{
		`"channel":"` + g.channel() + `"`,
		`"recipient":"` + g.text(recipientBound) + `"`,
		`"payload":` + g.value(0),
	}
	if g.r.IntN(2) == 0 {
		fields = append(fields, `"idempotency_key":"`+g.pick("k1", "k2", "k3", g.text(keyBound))+`"`)
	}
	if g.r.IntN(10) == 0 {
		fields = append(fields, `"unknown":1`)
	}
	if g.r.IntN(10) == 0 {
		fields = append(fields, `"send_at":"`+g.pick("2099-01-01T00:00:00Z", "yesterday", "1970-01-01T00:00:00Z", "9999-12-31T23:59:59Z")+`"`)
	}
	if g.r.IntN(20) == 0 {
		fields = append(fields, `"channel":12`) // a repeated key, of the wrong type
	}
	g.r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	return "{" + strings.Join(fields, ",") + "}"
}

// id is a path id: a number, or not; raw bytes included.
func (g *gen) id() string {
	return g.pick("1", "2", "-1", "0", "99999999999999999999", "9223372036854775807", "abc", "%00", "%FF", "\xff", "1e3", "0x10",
		strconv.Itoa(g.r.IntN(500)+1))
}

// query is a query string with hostile values, percent-escaped or raw.
func (g *gen) query(keys ...string) string {
	v := url.Values{}
	var raw []string
	for _, k := range keys {
		switch g.r.IntN(4) {
		case 0:
			v.Set(k, g.pick("hooks", "refused", "-5", "1000000", "abc", "\x00", "\xff", strings.Repeat("q", 2000), "PENDING", "RUNNING", "99999999999999999999"))
		case 1:
			raw = append(raw, k+"="+g.pick("\xff", "\xc3", "a\xfeb"))
		}
	}
	return strings.Join(append(raw, v.Encode()), "&")
}

func (g *gen) request() request {
	switch g.r.IntN(15) {
	case 0, 1, 2, 3, 4:
		return post(g.notification(), "")
	case 5:
		n := g.pick("2", "10", "100", "1000", "1001")
		k, _ := strconv.Atoi(n)
		items := make([]string, k)
		for i := range items {
			if i == 0 || g.r.IntN(50) == 0 {
				items[i] = g.notification()
			} else {
				items[i] = fmt.Sprintf(`{"channel":"hooks","recipient":"bulk-%d","payload":{}}`, i)
			}
		}
		return post(`{"notifications":[`+strings.Join(items, ",")+`]}`, "")
	case 6:
		return request{"GET", "/v1/notifications/" + g.id(), nil, ""}
	case 7:
		return request{"POST", "/v1/notifications/" + g.id() + "/cancel", nil, ""}
	case 8:
		return request{"GET", "/v1/dlq?" + g.query("channel", "limit", "after"), nil, ""}
	case 9:
		return request{"POST", "/v1/dlq/" + g.pick("replay", "purge"), []byte(g.pick(
			`{"ids":[`+g.id()+`]}`, `{"channel":"`+g.text(channelBound)+`"}`, `{"ids":[]}`, `{"ids":"x"}`, `{}`, `[]`, `{"ids":[1e999]}`)), ""}
	case 10:
		return request{"PUT", "/v1/subscribers/" + g.pick("s1", "%00", "%FF", "\xff", strings.Repeat("s", 300)), []byte(
			`{"addresses":{"hooks":"` + g.text(recipientBound) + `"},"attributes":{"t":` + g.value(0) + `},"topics":["fuzz"]}`), ""}
	case 11:
		return request{"POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"fuzz"},"payload":{"t":` +
			g.pick(`"{{.data.t}}"`, `"{{range .data.t}}{{range $.data.t}}x{{end}}{{end}}"`, `"{{printf \"%0999999d\" 1}}"`, `"{{"`, `"plain"`) + `}}`), ""}
	case 12:
		return request{"POST", "/v1/channels/" + g.pick("hooks", "refused", "nope", "%00", "\xff") + "/pause", []byte(`{"reason":"` + g.text(reasonBound) + `"}`), ""}
	case 13:
		return request{"GET", "/v1/subscribers/" + g.pick("s1", "%00", "\xff", "nobody"), nil, ""}
	default:
		return request{"GET", g.pick("/v1/jobs?"+g.query("state", "limit", "kind", "before"), "/v1/jobs/"+g.id(), "/v1/channels", "/v1/schedules"), nil, ""}
	}
}

// cliCommands are the CLI's share: send, status, cancel and dlq list with
// hostile arguments (a process argument cannot hold a NUL byte).
func (g *gen) cliCommands(n int) [][]string {
	var out [][]string
	for range n {
		switch g.r.IntN(4) {
		case 0:
			out = append(out, []string{"send", "--channel", g.pick("hooks", "refused", "nope", strings.Repeat("c", channelBound+1)),
				"--recipient", g.pick("cli-user", strings.Repeat("r", recipientBound), strings.Repeat("r", recipientBound+1), "a\x01b", "a\xffb"),
				"--payload", g.pick(`{"text":"hi"}`, `{`, `"x"`, `{"t":"a\u0000"}`, `null`),
				"--idempotency-key", g.pick("", "cli-k", strings.Repeat("k", keyBound+1))})
		case 1:
			out = append(out, []string{"status", g.pick("1", "-1", "99999999999999999999", "abc", strconv.Itoa(g.r.IntN(500)+1))})
		case 2:
			out = append(out, []string{"cancel", g.pick("1", "-1", "99999999999999999999", "abc", strconv.Itoa(g.r.IntN(500)+1))})
		default:
			out = append(out, []string{"dlq", "list", "--channel", g.pick("hooks", "x\xff", "x\x01", strings.Repeat("c", 5000))})
		}
	}
	return out
}
