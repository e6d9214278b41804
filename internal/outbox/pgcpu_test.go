package outbox_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// pgCPU is the CPU time each process of the local Postgres server has run
// so far (the backends, the WAL writer, the checkpointer), by pid, read from
// /proc/<pid>/schedstat in nanoseconds. A benchmark reports the difference
// per row as pg-µs/row (reportPGCPU): the figure issue 29 is about, which the
// rows/s of one connection hides behind its waits for the WAL flush. It
// counts every database's backends: run it on a quiet server.
func pgCPU(b *testing.B) map[string]time.Duration {
	b.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || string(bytes.TrimSpace(comm)) != "postgres" {
			continue
		}
		st, err := os.ReadFile(d + "/schedstat")
		if err != nil {
			continue // gone meanwhile
		}
		if f := bytes.Fields(st); len(f) > 0 {
			if ns, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
				out[filepath.Base(d)] = time.Duration(ns)
			}
		}
	}
	return out
}

// reportPGCPU reports the Postgres CPU per row since start: per process, so
// a backend that exits meanwhile takes its time with it rather than making
// the sum go back (its share is lost: a benchmark's own connections stay).
func reportPGCPU(b *testing.B, start map[string]time.Duration, rows int) {
	var total time.Duration
	for pid, t := range pgCPU(b) {
		total += t - start[pid] // a new process counts from 0
	}
	b.ReportMetric(float64(total)/1e3/float64(rows), "pg-µs/row")
}
