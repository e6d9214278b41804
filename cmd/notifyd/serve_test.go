package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
)

// TestServe_refusedForGood runs the built `notifyd serve` (and `migrate`)
// on a postgres.url naming a database that does not exist: it exits 1 on
// its own, with Postgres' reason and the key to change on stderr, where it
// used to wait for the database forever.
func TestServe_refusedForGood(t *testing.T) {
	t.Parallel()
	bin := testenv.BuildPlugin(t, "github.com/notifyd/notifyd/cmd/notifyd")
	rds := testenv.NewRedis(t)
	u, err := url.Parse(testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	missing := fmt.Sprintf("notifyd_no_such_db_%d", time.Now().UnixNano())
	u.Path = "/" + missing
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	path := filepath.Join(dir, "notifyd.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
postgres: {url: %q}
redis:    {url: %q, prefix: %q}
plugins:  {dir: %q}
http:     {listen: %q}
log:      {level: warn}
`, u.String(), rds.URL, rds.Prefix, dir, listen)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"serve", "--config", path}, {"migrate", "--config", path}} {
		t.Run(args[0], func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, args...)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(2 * time.Minute):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("notifyd %s still running after 2 minutes; stderr:\n%s", args[0], tail(stderr.String()))
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("notifyd %s: %v, want exit status 1; stderr:\n%s", args[0], err, tail(stderr.String()))
			}
			want := fmt.Sprintf(`notifyd: postgres.url: Postgres at %s refused the connection: database %q does not exist (SQLSTATE 3D000); waiting will not change this, fix postgres.url`, u.Host, missing)
			if !strings.Contains(stderr.String(), want+"\n") {
				t.Errorf("notifyd %s stderr:\n%s\nwant the line\n%s", args[0], tail(stderr.String()), want)
			}
		})
	}
}

// tail is the end of a process's output, for a failure message.
func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}
