package ui

import (
	"strings"
	"testing"
)

// truncate cuts to n runes and marks the cut, copying only what it keeps:
// it made a []rune of the whole text (4 bytes a rune), 16 KiB for each of
// a notification page's 1,000 attempts' errors.
// Not parallel: it counts allocations.
func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		n       int
		in, out string
	}{
		{3, "", ""}, {3, "abc", "abc"}, {3, "abcd", "abc…"}, {2, "héllo", "hé…"}, {0, "a", "…"}, {5, "한국어", "한국어"},
		{1, "\xffab", "\uFFFD…"},
	} {
		if got := truncate(c.n, c.in); got != c.out {
			t.Errorf("truncate(%d, %q) = %q, want %q", c.n, c.in, got, c.out)
		}
	}
	long := strings.Repeat("\"", 4096)
	if a := testing.AllocsPerRun(10, func() { _ = truncate(512, long) }); a > 1 {
		t.Errorf("truncate of a 4 KiB text allocated %v times", a)
	}
}
