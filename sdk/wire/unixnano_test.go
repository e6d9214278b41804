package wire_test

import (
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/wire"
)

func TestUnixNano(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name string
		t    time.Time
		want int64
	}{
		{"zero", time.Time{}, 0},
		{"now", now, now.UnixNano()},
		{"1970", time.Unix(0, 1), 1},
		{"year 2262, inside", time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC), time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC).UnixNano()},
		{"year 9999", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), 0},
		{"year 294276", time.Date(294276, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{"4713 BC", time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{"year 1600", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), 0},
	} {
		if got := wire.UnixNano(tc.t); got != tc.want {
			t.Errorf("%s: UnixNano = %d, want %d (time.UnixNano gives %d)", tc.name, got, tc.want, tc.t.UnixNano())
		}
	}
}
