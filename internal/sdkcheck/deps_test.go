package sdkcheck_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbidden are the packages a plugin or a client application must never
// link: the daemon's own code and the dependencies only it needs.
var forbidden = []string{
	"github.com/notifyd/notifyd/core",
	"github.com/notifyd/notifyd/internal",
	"github.com/redis/go-redis",
	"github.com/knadh/koanf",
	"github.com/pressly/goose",
	"github.com/robfig/cron",
	"github.com/prometheus/",
	"github.com/spf13/cobra",
	"github.com/valyala/fasthttp",
}

// TestOutsideModule builds, outside this repository, the programs the SDK
// exists for — provider plugins (examples/hello-provider on sdk.HTTPSender,
// examples/hello-batch on sdk.HTTPBatchSender) and an application that
// talks to notifyd over HTTP — each as a module of its own that depends on
// github.com/notifyd/notifyd/sdk alone, set up with the steps sdk/README.md
// gives for an unpublished checkout (checkoutSteps: this checkout's sdk/
// replaces the module, as a release would be fetched). go mod tidy then
// writes what each really needs:
// no go.mod may list the daemon's module or its dependencies, and no build
// may link any package of them. The client application may not link pgx or
// go-plugin either: it imports the client and nothing else. Each plugin's
// own test runs there too: the conformance kit (sdktest) against the plugin
// in process and as the built binary.
func TestOutsideModule(t *testing.T) {
	checkout := checkoutDir(t)
	example := func(dir, file string) string { return readFile(t, filepath.Join("..", "..", "examples", dir, file)) }
	for _, app := range []struct {
		name, main string
		test       string   // main_test.go, run there when set
		extra      []string // further packages it must not link
	}{
		{name: "plugin", main: example("hello-provider", "main.go"), test: example("hello-provider", "main_test.go")},
		{name: "batchplugin", main: example("hello-batch", "main.go"), test: example("hello-batch", "main_test.go")},
		// A plugin links OpenTelemetry (the SDK continues each message's
		// trace, docs/design.md §11); an HTTP client application does not.
		{name: "clientapp", main: clientMain, extra: []string{"github.com/jackc/pgx", "github.com/hashicorp/go-plugin", "google.golang.org/grpc", "go.opentelemetry.io/"}},
	} {
		t.Run(app.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			write(t, filepath.Join(dir, "main.go"), app.main)
			if app.test != "" {
				write(t, filepath.Join(dir, "main_test.go"), app.test)
			}
			setUpModule(t, dir, "example.com/"+app.name, checkout, false)
			gocmd(t, dir, "mod", "tidy")
			mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			bad := append(append([]string{}, forbidden...), app.extra...)
			for _, b := range bad {
				if strings.Contains(string(mod), b) {
					t.Errorf("go.mod lists %s:\n%s", b, mod)
				}
			}
			checkLinks(t, gocmd(t, dir, "list", "-deps", "."), bad)
			if strings.Contains(string(mod), "github.com/notifyd/notifyd ") {
				t.Errorf("go.mod requires the daemon's module:\n%s", mod)
			}
			gocmd(t, dir, "build", "-o", filepath.Join(dir, app.name), ".")
			if app.test != "" {
				gocmd(t, dir, "test", "-count=1", ".")
			}
		})
	}
}

const clientMain = `package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/notifyd/notifyd/sdk/client"
)

func main() {
	c, err := client.New("http://127.0.0.1:8080", "token")
	if err != nil {
		panic(err)
	}
	res, err := c.Enqueue(context.Background(), client.Notification{
		Channel: "orders", Recipient: "user-1", Payload: json.RawMessage(` + "`{}`" + `),
	})
	fmt.Println(res, err)
}
`

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gocmd runs the go tool in dir, outside any workspace, and returns its
// standard output.
func gocmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, tail(string(out)+stderr.String(), 8<<10))
	}
	return string(out)
}

// tail is the last n bytes of s: a failing go test's output, bounded.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// checkLinks fails the test for each package of deps (go list -deps) under
// one of the prefixes bad.
func checkLinks(t *testing.T, deps string, bad []string) {
	t.Helper()
	for _, p := range strings.Fields(deps) {
		for _, b := range bad {
			if strings.HasPrefix(p, b) {
				t.Errorf("links %s", p)
			}
		}
	}
}

// checkoutDir is this checkout's root: the daemon's module, with the SDK's in
// sdk/.
func checkoutDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
