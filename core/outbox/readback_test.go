package outbox_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk/wire"
)

// TestJSONReadBack_postgres holds wire.JSONReadBack to what Postgres really
// prints: for a single number exactly (but a zero integer part), and for
// whole documents never less. The claim, the API and EnqueueTx all rely on it
// as an upper bound of the bytes a payload reads back as.
func TestJSONReadBack_postgres(t *testing.T) {
	b := setup(t)
	r := rand.New(rand.NewPCG(26, 1))
	number := func() string {
		var sb strings.Builder
		if r.IntN(3) == 0 {
			sb.WriteByte('-')
		}
		if r.IntN(4) == 0 {
			sb.WriteByte('0')
		} else {
			sb.WriteString(fmt.Sprint(1 + r.IntN(99999)))
		}
		if r.IntN(2) == 0 {
			sb.WriteString("." + fmt.Sprint(r.IntN(1000)))
			if r.IntN(3) == 0 {
				sb.WriteString("000")
			}
		}
		if r.IntN(2) == 0 {
			sb.WriteString([]string{"e", "E", "e+", "e-", "E-"}[r.IntN(5)] + fmt.Sprint(r.IntN(60)))
		}
		return sb.String()
	}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := r.IntN(6); {
		case depth > 3 || k < 2:
			return number()
		case k == 2:
			return []string{`"x"`, `"a\"b:,"`, `"\u00e9\/"`, `true`, `null`, `""`}[r.IntN(6)]
		case k == 3:
			parts := make([]string, r.IntN(4))
			for i := range parts {
				parts[i] = value(depth + 1)
			}
			return " [ " + strings.Join(parts, " ,\n") + "]"
		default:
			parts := make([]string, r.IntN(4))
			for i := range parts {
				parts[i] = fmt.Sprintf(`"k%d" : %s`, i, value(depth+1))
			}
			return "{" + strings.Join(parts, ",") + " }"
		}
	}
	var problems []string
	for i := range 2000 {
		doc := value(0)
		if i%2 == 0 {
			doc = number()
		}
		size, problem := wire.JSONReadBack([]byte(doc))
		if problem != "" {
			continue
		}
		var pg int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT octet_length($1::jsonb::text)`, doc).Scan(&pg); err != nil {
			t.Fatalf("Postgres refused %q: %v", doc, err)
		}
		// Exact but for a zero integer part (0.5e3, -0), which the bound
		// counts one digit too many.
		exact := i%2 == 0 && !strings.HasPrefix(strings.TrimPrefix(doc, "-"), "0")
		if size < pg || exact && size != pg {
			problems = append(problems, fmt.Sprintf("%q: JSONReadBack %d, Postgres %d", doc, size, pg))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d documents read back otherwise than JSONReadBack says; the first:\n%s",
			len(problems), strings.Join(problems[:min(10, len(problems))], "\n"))
	}
}
