package wire

import (
	"math"
	"time"
)

// The times an int64 of Unix nanoseconds holds, which is how the plugin
// protocol carries a time.
var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// UnixNano is t as the plugin protocol carries it: Unix nanoseconds, or 0
// ("no time") when t is zero or outside what they hold (1677-09-21 to
// 2262-04-11). time.Time.UnixNano wraps around outside it: a created_at an
// application's SQL wrote as year 294276 reached a plugin as another date.
func UnixNano(t time.Time) int64 {
	if t.IsZero() || t.Before(minUnixNano) || t.After(maxUnixNano) {
		return 0
	}
	return t.UnixNano()
}
