package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoad_ConfigReadBounded points Load at a FIFO that a writer
// feeds without end (as --config /dev/zero, or a log file or an image named
// by mistake, would be): Load must stop reading at MaxFileBytes and say so,
// naming the file, where it used to read whatever came into memory (a
// 100 MB file held 500 MB; /dev/zero grew until the kernel killed it).
func TestLoad_ConfigReadBounded(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "notifyd.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	// The writer stops by itself after 4× the bound, so the test ends
	// (and fails) on code that reads without one.
	const bound = 16 << 20 // MaxFileBytes; literal, so this test also builds on the code before it
	limit := int64(4 * bound)
	wrote := make(chan int64, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			wrote <- -1
			return
		}
		defer f.Close()
		line := []byte("# " + strings.Repeat("x", 1021) + "\n")
		var n int64
		for n < limit {
			m, err := f.Write(line)
			n += int64(m)
			if err != nil {
				break // EPIPE: the reader closed the file
			}
		}
		wrote <- n
	}()
	done := make(chan error, 1)
	go func() {
		_, err := Load(p, []string{})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("Load still reading the FIFO after 2 minutes")
	}
	n := <-wrote
	if n >= limit {
		t.Errorf("Load read all %d bytes the writer gave; want it to stop past MaxFileBytes (%d)", n, bound)
	}
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("Load = %v, want an error naming %s and its size bound", err, p)
	}
}

// TestLoad_ShellDefaultSyntaxRefused writes a secret with the
// shell's default syntax, ${NAME:-fallback}, which notifyd does not expand
// (only ${NAME}): it was loaded silently as the literal text, so the API's
// token was "${NOTIFYD_API_TOKEN:-…}" whether the variable was set or not.
func TestLoad_ShellDefaultSyntaxRefused(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{
		"${NOTIFYD_T:-0123456789abcdefghij}",
		"${NOTIFYD_T-0123456789abcdefghij}",
		"${NOTIFYD_T:?0123456789abcdefghij}",
		"prefix-${NOTIFYD_T:=0123456789abcdefghij}",
	} {
		for _, env := range [][]string{{}, {"NOTIFYD_T=abcdefghij0123456789"}} {
			_, err := Load(write(t, minimal+`
http: {tokens: ["`+ref+`"]}
`), env)
			if err == nil || !strings.Contains(err.Error(), "http.tokens[0]") || !strings.Contains(err.Error(), "${NAME}") {
				t.Errorf("tokens [%q], env %q: Load = %v, want an error naming http.tokens[0] and the ${NAME} form", ref, env, err)
			}
		}
	}
	// ${NAME} is still expanded, and a "$" that starts no reference stays.
	cfg, err := Load(write(t, minimal+`
http: {tokens: ["${NOTIFYD_T}", "pa$$word-{x}-0123456789"]}
`), []string{"NOTIFYD_T=abcdefghij0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.HTTP.Tokens; len(got) != 2 || got[0] != "abcdefghij0123456789" || got[1] != "pa$$word-{x}-0123456789" {
		t.Errorf("tokens = %q", got)
	}
}
