package main

import (
	"strings"
	"testing"
	"time"
)

func TestUntilQuotaReset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		now  string
		q    quota
		want time.Duration
	}{
		{"2025-03-10T14:30:00Z", quotaDaily, 30 * time.Minute}, // 23:30 KST
		{"2025-03-10T15:00:00Z", quotaDaily, 24 * time.Hour},   // 00:00 KST exactly: the next reset
		{"2025-03-10T00:00:00Z", quotaDaily, 15 * time.Hour},   // 09:00 KST
		{"2025-12-31T14:59:59Z", quotaDaily, time.Second},      // year end
		{"2025-03-10T14:30:00Z", quotaMonthly, 21*24*time.Hour + 30*time.Minute},
		{"2025-12-15T15:00:00Z", quotaMonthly, 16 * 24 * time.Hour}, // 12-16 00:00 KST → 01-01
		{"2025-03-10T14:30:00Z", quotaNone, 0},
	}
	for _, tt := range tests {
		now, err := time.Parse(time.RFC3339, tt.now)
		if err != nil {
			t.Fatal(err)
		}
		if got := untilQuotaReset(now, tt.q); got != tt.want {
			t.Errorf("untilQuotaReset(%s, %d) = %v, want %v", tt.now, tt.q, got, tt.want)
		}
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	got := clean("a\x00b\n\tc \xff" + strings.Repeat("가", 200))
	if !strings.HasPrefix(got, "a b c ?") || len(got) > maxDetail+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("clean = %q", got)
	}
	if strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("clean cut a rune: %q", got)
	}
}
