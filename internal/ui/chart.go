package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/internal/service"
)

const (
	chartW = 240.0
	chartH = 48.0
)

// chart is a throughput sparkline, drawn as inline SVG by the template.
type chart struct {
	Line   string  // polyline points "x,y x,y …"
	Area   string  // the same, closed along the bottom edge, for the fill
	Last   float64 // latest rate, per second
	Peak   float64 // highest rate in the window
	Span   time.Duration
	Points int
}

// newChart lays rates out over the chart: x by time across the window they
// span, y from 0 to the peak (at least 1/s, so a trickle does not look like
// a flood).
func newChart(rs []service.Rate) chart {
	c := chart{Points: len(rs)}
	if len(rs) < 2 {
		if len(rs) == 1 {
			c.Last, c.Peak = rs[0].PerSec, rs[0].PerSec
		}
		return c
	}
	first, last := rs[0].At, rs[len(rs)-1].At
	c.Span = last.Sub(first)
	c.Last = rs[len(rs)-1].PerSec
	top := 1.0
	for _, r := range rs {
		c.Peak = max(c.Peak, r.PerSec)
	}
	top = max(top, c.Peak)
	var line strings.Builder
	for i, r := range rs {
		x := chartW * r.At.Sub(first).Seconds() / c.Span.Seconds()
		y := chartH - 2 - (chartH-4)*r.PerSec/top
		if i > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(num(x) + "," + num(y))
	}
	c.Line = line.String()
	c.Area = "0," + num(chartH) + " " + c.Line + " " + num(chartW) + "," + num(chartH)
	return c
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// perSec formats a rate for people: "0", "0.4/s", "12/s", "1.2k/s".
func perSec(f float64) string {
	switch {
	case f == 0:
		return "0/s"
	case f < 10:
		return strconv.FormatFloat(f, 'f', 1, 64) + "/s"
	case f < 1000:
		return fmt.Sprintf("%.0f/s", f)
	default:
		return strconv.FormatFloat(f/1000, 'f', 1, 64) + "k/s"
	}
}
