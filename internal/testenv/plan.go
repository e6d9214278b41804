package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EvaluatedOnce fails t unless Postgres' plan for query computes the
// expression that needle names once per row: every lowest plan node whose
// output mentions needle (no node below it does) mentions it exactly once.
//
// It is how a test holds a statement to printing a payload once. The planner
// flattens a plain subquery into the query around it, copying the
// subquery's expression into every place that reads its column, so
// "(SELECT payload::text) p(t)" read three times prints the payload three
// times; OFFSET 0 keeps the subquery apart. (A node above the one that
// computes the expression shows it again in EXPLAIN, by name, without
// computing it: only the lowest mention counts.) args are bound as the
// statement's parameters; EXPLAIN runs nothing.
func EvaluatedOnce(t testing.TB, pool *pgxpool.Pool, query, needle string, args ...any) {
	t.Helper()
	var raw []byte
	if err := pool.QueryRow(context.Background(), "EXPLAIN (VERBOSE, COSTS OFF, FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN: %d plans, err %v", len(plans), err)
	}
	var lowest []string
	plans[0].Plan.lowest(needle, &lowest)
	if len(lowest) == 0 {
		t.Fatalf("no plan node computes %q: the test's needle no longer matches the statement", needle)
	}
	for _, out := range lowest {
		if n := strings.Count(out, needle); n != 1 {
			t.Errorf("a plan node computes %q %d times per row, want once (a subquery flattened into its readers?): %.600s",
				needle, n, out)
		}
	}
}

type planNode struct {
	Type   string     `json:"Node Type"`
	Output []string   `json:"Output"`
	Plans  []planNode `json:"Plans"`
}

// lowest appends the output of every node that mentions needle while none
// of its descendants does; it reports whether n or a descendant mentions it.
func (n planNode) lowest(needle string, out *[]string) bool {
	below := false
	for _, c := range n.Plans {
		if c.lowest(needle, out) {
			below = true
		}
	}
	own := strings.Join(n.Output, ", ")
	if !strings.Contains(own, needle) {
		return below
	}
	if !below {
		*out = append(*out, fmt.Sprintf("%s: %s", n.Type, own))
	}
	return true
}
