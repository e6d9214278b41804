package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
)

// countingLines is an import file of n subscribers, each with one attribute
// of size bytes (written as it is read, never held whole), counting what was
// read of it.
type countingLines struct {
	n, size, line int
	buf           bytes.Buffer
	read          int64
}

func (c *countingLines) Read(p []byte) (int, error) {
	if c.buf.Len() == 0 {
		if c.line == c.n {
			return 0, io.EOF
		}
		c.line++
		fmt.Fprintf(&c.buf, `{"external_id":"u%d","attributes":{"bio":"%s"}}`+"\n", c.line, strings.Repeat("x", c.size))
	}
	n, _ := c.buf.Read(p)
	c.read += int64(n)
	return n, nil
}

// `subscribers import --config` decoded up to 5,000 lines of up to 4 MiB
// each (20 GiB) before the first upsert checked any of them: 60 lines of
// 1 MiB attributes — each over the 64 KiB bound from its first line — were
// all read and held (60 MiB, more once decoded) before the import failed.
// A batch also ends at importBatchBytes of input, so what the CLI holds
// before the store's checks see it is bounded by bytes, not only by count.
func TestSubscribersImport_BatchBoundedByBytes(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	path := filepath.Join(t.TempDir(), "notifyd.yaml")
	yaml := `postgres: {url: "` + db.URL + `"}
redis: {url: "redis://127.0.0.1:6379/0"}
log: {level: error}
channels: {quiz: {plugin: webhook}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &countingLines{n: 60, size: 1 << 20}
	root := newRoot()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetIn(in)
	root.SetArgs([]string{"subscribers", "import", "-c", path, "-"})
	err := root.ExecuteContext(testenv.Context(t))
	if err == nil || !strings.Contains(err.Error(), "attributes are") {
		t.Fatalf("import of subscribers with 1 MiB attributes: %v; want the attribute bound named", err)
	}
	if bound := int64(importBatchBytes + 2<<20); in.read > bound {
		t.Errorf("the import read %d bytes (%d lines) before the first check refused line 1; want at most %d", in.read, in.line, bound)
	}

	// Many small subscribers still go 5,000 to a statement, and all of them.
	small := &countingLines{n: 12_000, size: 10}
	root = newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetIn(small)
	root.SetArgs([]string{"subscribers", "import", "-c", path, "-"})
	if err := root.ExecuteContext(testenv.Context(t)); err != nil || !strings.Contains(out.String(), "12000 subscribers upserted") {
		t.Errorf("import of 12,000 small subscribers: %v, %q", err, out.String())
	}
}
