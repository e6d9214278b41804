package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// builds caches plugin builds per test binary: linking takes a second or
// more, and many tests want the same plugin.
var builds sync.Map // absolute package dir or import path → *build

type build struct {
	once sync.Once
	path string
	err  error
}

// BuildPlugin `go build`s the main package pkg (a path relative to the
// test's directory such as "./testdata/crash", or an import path) once per
// test binary and returns the executable's path. Builds live under
// $TMPDIR/notifyd-testplugins/, one file per package, replaced atomically,
// so parallel test binaries never see a half-written file and nothing piles
// up between runs. Treat the file as read-only: copy it (InstallPlugin) to
// change it.
func BuildPlugin(t testing.TB, pkg string) string {
	t.Helper()
	key := pkg
	if strings.HasPrefix(pkg, ".") || filepath.IsAbs(pkg) { // as the go tool tells paths from import paths
		abs, err := filepath.Abs(pkg)
		if err != nil {
			t.Fatalf("testenv: build plugin %s: %v", pkg, err)
		}
		key = abs
	}
	v, _ := builds.LoadOrStore(key, &build{})
	b := v.(*build)
	b.once.Do(func() { b.path, b.err = goBuild(pkg, key) })
	if b.err != nil {
		t.Fatalf("testenv: build plugin %s: %v", pkg, b.err)
	}
	return b.path
}

// InstallPlugin builds pkg and puts it into dir as notifyd-plugin-<name>,
// the name the plugin host discovers, and returns its path. It hard-links
// when it can: a freshly written copy can fail to start with "text file busy"
// while another goroutine forks (golang/go#22315). Never modify the file.
func InstallPlugin(t testing.TB, dir, name, pkg string) string {
	t.Helper()
	src := BuildPlugin(t, pkg)
	dst := filepath.Join(dir, "notifyd-plugin-"+name)
	if err := os.Link(src, dst); err == nil {
		return dst
	}
	if err := copyFile(src, dst, 0o755); err != nil {
		t.Fatalf("testenv: install plugin %s as %s: %v", pkg, dst, err)
	}
	return dst
}

func goBuild(pkg, key string) (string, error) {
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(os.TempDir(), "notifyd-testplugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(key)+"-"+hex.EncodeToString(sum[:6]))
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.Command(goTool(), "build", "-o", tmp, pkg)
	start := time.Now()
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build: %v\n%s", err, msg)
	}
	if time.Since(start) > time.Minute {
		fmt.Fprintf(os.Stderr, "testenv: building %s took %v\n", pkg, time.Since(start).Round(time.Second))
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return out, nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ReadPIDs reads the pids a test plugin wrote to path, whitespace-separated
// (the sessionhog plugin's grandchildren, for a cleanup to kill); none when
// the file is missing.
func ReadPIDs(path string) []int {
	raw, _ := os.ReadFile(path)
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
