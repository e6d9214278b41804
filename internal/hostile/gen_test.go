package hostile

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
)

// gen makes hostile requests from a seeded source.
type gen struct{ r *rand.Rand }

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

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
	default:
		return fmt.Sprintf("user-%d", g.r.IntN(1000))
	}
}

func (g *gen) channel() string {
	switch g.r.IntN(8) {
	case 0:
		return g.text(200)
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
	switch g.r.IntN(14) {
	case 0:
		return strings.Repeat("[", 200) + strings.Repeat("]", 200) // deep
	case 1:
		return `1e999999`
	case 2:
		return `-0.0000000000000000000000000001`
	case 3:
		return `"` + g.text(100) + `"`
	case 4:
		return `{"a":` + g.value(depth+1) + `,"b":[` + g.value(depth+1) + `]}`
	case 5:
		return `"` + strings.Repeat("p", 256<<10) + `"` // about the payload bound
	case 6:
		return `null`
	case 7:
		return `"{{.data.missing}}"`
	default:
		return `{"text":"hello"}`
	}
}

func (g *gen) notification() string {
	fields := []string{
		`"channel":"` + g.channel() + `"`,
		`"recipient":"` + g.text(1024) + `"`,
		`"payload":` + g.value(0),
	}
	if g.r.IntN(2) == 0 {
		fields = append(fields, `"idempotency_key":"`+g.pick("k1", "k2", g.text(512))+`"`)
	}
	if g.r.IntN(10) == 0 {
		fields = append(fields, `"unknown":1`)
	}
	if g.r.IntN(10) == 0 {
		fields = append(fields, `"send_at":"`+g.pick("2099-01-01T00:00:00Z", "yesterday", "1970-01-01T00:00:00Z")+`"`)
	}
	g.r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	return "{" + strings.Join(fields, ",") + "}"
}

// id is a path id: a number, or not.
func (g *gen) id() string {
	return g.pick("1", "2", "-1", "0", "99999999999999999999", "abc", "%00", "%FF", "1e3", strconv.Itoa(g.r.IntN(500)+1))
}

// query is a query string with hostile values.
func (g *gen) query(keys ...string) string {
	v := url.Values{}
	for _, k := range keys {
		if g.r.IntN(2) == 0 {
			v.Set(k, g.pick("hooks", "-5", "1000000", "abc", "\x00", "\xff", strings.Repeat("q", 2000), "PENDING", "RUNNING"))
		}
	}
	return v.Encode()
}

func (g *gen) request() (method, path string, body []byte) {
	switch g.r.IntN(14) {
	case 0, 1, 2, 3, 4:
		return "POST", "/v1/notifications", []byte(g.notification())
	case 5:
		n := g.pick("2", "10", "1000", "1001")
		k, _ := strconv.Atoi(n)
		items := make([]string, k)
		for i := range items {
			if i == 0 || g.r.IntN(50) == 0 {
				items[i] = g.notification()
			} else {
				items[i] = fmt.Sprintf(`{"channel":"hooks","recipient":"bulk-%d","payload":{}}`, i)
			}
		}
		return "POST", "/v1/notifications", []byte(`{"notifications":[` + strings.Join(items, ",") + `]}`)
	case 6:
		return "GET", "/v1/notifications/" + g.id(), nil
	case 7:
		return "POST", "/v1/notifications/" + g.id() + "/cancel", nil
	case 8:
		return "GET", "/v1/dlq?" + g.query("channel", "limit", "after"), nil
	case 9:
		return "POST", "/v1/dlq/" + g.pick("replay", "purge"), []byte(g.pick(
			`{"ids":[`+g.id()+`]}`, `{"channel":"`+g.text(200)+`"}`, `{"ids":[]}`, `{"ids":"x"}`, `{}`, `[]`))
	case 10:
		return "PUT", "/v1/subscribers/" + g.pick("s1", "%00", "%FF", strings.Repeat("s", 300)), []byte(
			`{"addresses":{"hooks":"` + g.text(1024) + `"},"attributes":{"t":` + g.value(0) + `},"topics":["fuzz"]}`)
	case 11:
		return "POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"fuzz"},"payload":{"t":` +
			g.pick(`"{{.data.t}}"`, `"{{range .data.t}}{{range $.data.t}}x{{end}}{{end}}"`, `"{{printf \"%0999999d\" 1}}"`, `"{{"`, `"plain"`) + `}}`)
	case 12:
		return "POST", "/v1/channels/" + g.pick("hooks", "nope", "%00") + "/pause", []byte(`{"reason":"` + g.text(1024) + `"}`)
	default:
		return "GET", g.pick("/v1/jobs?"+g.query("state", "limit"), "/v1/jobs/"+g.id(), "/v1/channels", "/v1/schedules"), nil
	}
}

func (g *gen) cliCommands() [][]string {
	var out [][]string
	for range 8 {
		switch g.r.IntN(4) {
		case 0:
			out = append(out, []string{"send", "--channel", g.pick("hooks", "nope"), "--recipient", g.pick("cli-user", strings.Repeat("r", 1025), "a\x01b"),
				"--payload", g.pick(`{"text":"hi"}`, `{`, `"x"`)})
		case 1:
			out = append(out, []string{"status", g.id()})
		case 2:
			out = append(out, []string{"cancel", g.id()})
		default:
			out = append(out, []string{"dlq", "list", "--channel", g.pick("hooks", "x\xff")})
		}
	}
	return out
}
