package sdkcheck_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
)

// The modules, and the version `go get` asks for while they are unpublished:
// no proxy has either, so each is replaced by its directory in a checkout,
// and the zero pseudo-version is the one a replacement provides.
const (
	daemonModule = "github.com/notifyd/notifyd"
	sdkModule    = "github.com/notifyd/notifyd/sdk"
	zeroVersion  = "v0.0.0-00010101000000-000000000000"
)

// checkoutSteps are the go commands README.md ("Using the modules from
// outside") and sdk/README.md give to depend on an unpublished checkout at
// checkout, in a module that go mod init has made: replace each module by its
// directory, then go get it at the zero version. Replacements apply only in
// the main module — the daemon's own `replace …/sdk => ./sdk` is ignored
// where the daemon is a dependency — so an application embedding the daemon
// (withDaemon) replaces both; a plugin or a client application the SDK alone.
// TestCheckoutStepsDocumented keeps the documents saying exactly these.
func checkoutSteps(checkout string, withDaemon bool) [][]string {
	edit, get := []string{"mod", "edit"}, []string{"get"}
	if withDaemon {
		edit = append(edit, "-replace="+daemonModule+"="+checkout)
		get = append(get, daemonModule+"@"+zeroVersion)
	}
	edit = append(edit, "-replace="+sdkModule+"="+checkout+"/sdk")
	get = append(get, sdkModule+"@"+zeroVersion)
	return [][]string{edit, get}
}

// setUpModule makes dir the module named module depending on the checkout's
// modules, with go mod init and checkoutSteps and nothing else.
func setUpModule(t *testing.T, dir, module, checkout string, withDaemon bool) {
	t.Helper()
	gocmd(t, dir, "mod", "init", module)
	for _, step := range checkoutSteps(checkout, withDaemon) {
		gocmd(t, dir, step...)
	}
}

// TestCheckoutStepsDocumented: README.md gives the steps for an embedding
// application and for a plugin or client, sdk/README.md those for the
// latter, each as the one command line checkoutSteps runs (a checkout at
// /path/to/notifyd; a line may be continued with a backslash).
func TestCheckoutStepsDocumented(t *testing.T) {
	t.Parallel()
	for _, doc := range []struct {
		path string
		want []bool // withDaemon of each set of steps it must give
	}{
		{"README.md", []bool{true, false}},
		{filepath.Join("sdk", "README.md"), []bool{false}},
	} {
		text := shellLines(readFile(t, filepath.Join("..", "..", doc.path)))
		for _, withDaemon := range doc.want {
			for _, step := range checkoutSteps("/path/to/notifyd", withDaemon) {
				line := "go " + strings.Join(step, " ")
				if !strings.Contains(text, "\n"+line+"\n") {
					t.Errorf("%s does not give the step %q (withDaemon %v)", doc.path, line, withDaemon)
				}
			}
		}
	}
}

// shellLines is markdown text with continued lines joined, runs of blanks
// made one space and each line's indentation and trailing comment removed.
func shellLines(s string) string {
	s = regexp.MustCompile(`\\\n\s*`).ReplaceAllString(s, " ")
	var b strings.Builder
	b.WriteString("\n")
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		b.WriteString(strings.Join(strings.Fields(l), " "))
		b.WriteString("\n")
	}
	return b.String()
}

// TestOutsideEmbedding builds, outside this repository, each as a module of
// its own set up with only the documented steps (checkoutSteps, under
// GOFLAGS=-mod=mod):
//
//   - an application embedding the daemon (embedderMain), importing the root
//     package github.com/notifyd/notifyd and the SDK's packages and nothing
//     else — no package of config/ or internal/, which it reaches only
//     through the root package;
//   - a provider plugin (pluginMain), importing the SDK alone and served
//     with sdk.Serve, linking nothing of the daemon.
//
// Then it runs the application twice against the real Postgres and Redis,
// from a config file it reads with notifyd.LoadConfig: with a provider
// written in Go (notifyd.NewInProcess), and with the plugin in plugins.dir.
// Each time the application enqueues one notification through sdk/client on
// Daemon.Addr and waits for it to be SENT; the test reads it SENT in
// Postgres with the result the provider gave, so it went through that
// provider.
func TestOutsideEmbedding(t *testing.T) {
	t.Parallel()
	checkout := checkoutDir(t)

	plugins := t.TempDir()
	pluginDir := t.TempDir()
	write(t, filepath.Join(pluginDir, "main.go"), pluginMain)
	setUpModule(t, pluginDir, "example.com/outsideplugin", checkout, false)
	gocmd(t, pluginDir, "build", "-o", filepath.Join(plugins, "notifyd-plugin-outside"), ".")
	checkLinks(t, gocmd(t, pluginDir, "list", "-deps", "."), forbidden)
	checkImports(t, pluginDir, false)

	appDir := t.TempDir()
	write(t, filepath.Join(appDir, "main.go"), embedderMain)
	setUpModule(t, appDir, "example.com/embedder", checkout, true)
	mod := readFile(t, filepath.Join(appDir, "go.mod"))
	for _, want := range []string{
		daemonModule + " " + zeroVersion, sdkModule + " " + zeroVersion,
		"replace " + daemonModule + " => " + checkout + "\n", "replace " + sdkModule + " => " + checkout + "/sdk\n",
	} {
		if !strings.Contains(mod, want) {
			t.Errorf("the embedder's go.mod lacks %q:\n%s", want, mod)
		}
	}
	app := filepath.Join(appDir, "embedder")
	gocmd(t, appDir, "build", "-o", app, ".")
	checkImports(t, appDir, true)
	if deps := strings.Fields(gocmd(t, appDir, "list", "-deps", ".")); !contains(deps, daemonModule) {
		t.Fatalf("the embedder does not link %s:\n%s", daemonModule, strings.Join(deps, "\n"))
	}

	for _, run := range []struct {
		name, channel, plugin, by string
		inProcess                 bool
	}{
		{name: "in-process provider", channel: "inbox", plugin: "memo", by: "in-process", inProcess: true},
		{name: "outside plugin", channel: "outside", plugin: "outside", by: "outside-plugin"},
	} {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			db := testenv.NewDB(t)
			rds := testenv.NewRedis(t)
			cfgPath := filepath.Join(t.TempDir(), "notifyd.yaml")
			yaml := fmt.Sprintf("postgres: {url: %q}\nredis: {url: %q, prefix: %q}\n"+
				"http: {listen: \"127.0.0.1:0\", tokens: [\"${OUTSIDE_TOKEN}\"]}\n"+
				"channels:\n  %s: {plugin: %s}\n", db.URL, rds.URL, rds.Prefix, run.channel, run.plugin)
			if !run.inProcess {
				yaml += fmt.Sprintf("plugins: {dir: %q}\n", plugins)
			}
			write(t, cfgPath, yaml)

			ctx, cancel := context.WithTimeout(testenv.Context(t), 2*time.Minute)
			defer cancel()
			args := []string{"-config", cfgPath, "-channel", run.channel}
			if run.inProcess {
				args = append(args, "-in-process")
			}
			cmd := exec.CommandContext(ctx, app, args...)
			cmd.Dir = appDir
			// The config file is the whole config: the NOTIFYD_ variables of
			// the test's environment are left out; the token comes through a
			// ${…} reference and the log level through NOTIFYD_LOG_LEVEL,
			// as LoadConfig reads them for `notifyd serve`.
			cmd.Env = append(withoutNotifydEnv(os.Environ()), "OUTSIDE_TOKEN=outside-token-0123456789", "NOTIFYD_LOG_LEVEL=warn")
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err != nil {
				t.Fatalf("the embedder: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), tail(stderr.String(), 8<<10))
			}
			last := lastLine(stdout.String())
			var id int64
			if f := strings.Fields(last); len(f) < 2 || f[0] != "SENT" {
				t.Fatalf("the embedder's last line is not `SENT <id> <result>`:\n%s\nstderr:\n%s", stdout.String(), tail(stderr.String(), 8<<10))
			} else if id, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				t.Fatalf("the embedder's last line %q: %v", last, err)
			}
			var status, by string
			if err := db.Pool.QueryRow(ctx, `SELECT status, coalesce(result->>'by', '') FROM notifications WHERE id = $1`, id).Scan(&status, &by); err != nil {
				t.Fatalf("notification %d in Postgres: %v", id, err)
			}
			if status != "SENT" || by != run.by {
				t.Errorf("notification %d in Postgres is %s by %q, want SENT by %q (the embedder printed %q)", id, status, by, run.by, last)
			}
			if out := stdout.String(); run.inProcess && !regexp.MustCompile(`(?m)^memo: ada \{"text": ?"hello from outside"\}$`).MatchString(out) {
				t.Errorf("the in-process provider did not print the notification:\n%s", out)
			}
		})
	}
}

// checkImports fails the test unless every package of the module in dir
// imports only the standard library and the SDK's packages, and, when
// withDaemon, the daemon's root package.
func checkImports(t *testing.T, dir string, withDaemon bool) {
	t.Helper()
	lines := gocmd(t, dir, "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{"\n"}}{{end}}{{end}}`, ".")
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		n++
		for _, bad := range outsideImports(f[1:], withDaemon) {
			t.Errorf("%s imports %s: an outside program may import the standard library, %s and %s/... only", f[0], bad, daemonModule, sdkModule)
		}
	}
	if n == 0 {
		t.Fatalf("go list found no package of the module in %s:\n%s", dir, lines)
	}
}

// outsideImports returns the imports an outside program may not have: all
// but the standard library (a first element without a dot), the SDK's
// packages and, when withDaemon, the daemon's root package — never config/
// or internal/.
func outsideImports(imports []string, withDaemon bool) (bad []string) {
	for _, p := range imports {
		first, _, _ := strings.Cut(p, "/")
		switch {
		case !strings.Contains(first, "."):
		case p == sdkModule || strings.HasPrefix(p, sdkModule+"/"):
		case withDaemon && p == daemonModule:
		default:
			bad = append(bad, p)
		}
	}
	return bad
}

// TestOutsideImports: the check of an outside program's imports refuses the
// daemon's other packages, so TestOutsideEmbedding's passing means something.
func TestOutsideImports(t *testing.T) {
	t.Parallel()
	ok := []string{"context", "net/http", daemonModule, sdkModule, sdkModule + "/client", sdkModule + "/wire"}
	if bad := outsideImports(ok, true); bad != nil {
		t.Errorf("outsideImports(%v) = %v, want none", ok, bad)
	}
	for _, tc := range []struct {
		imports    []string
		withDaemon bool
	}{
		{[]string{daemonModule + "/config"}, true},
		{[]string{daemonModule + "/internal/delivery"}, true},
		{[]string{daemonModule + "/cmd/notifyd"}, true},
		{[]string{"github.com/redis/go-redis/v9"}, true},
		{[]string{daemonModule}, false},
		{[]string{"github.com/notifyd/notifyd/sdkx"}, false},
	} {
		if bad := outsideImports(tc.imports, tc.withDaemon); len(bad) != 1 {
			t.Errorf("outsideImports(%v, %v) = %v, want it refused", tc.imports, tc.withDaemon, bad)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

func withoutNotifydEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "NOTIFYD_") {
			out = append(out, kv)
		}
	}
	return out
}

// embedderMain is an application embedding notifyd as README.md's
// "Embedding notifyd" says: the root package and the SDK, nothing else.
const embedderMain = `// Command embedder runs notifyd inside its own process, from a config file,
// sends one notification through the API and waits for it to be SENT.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

// memo is a provider written in Go: it prints what it delivers.
type memo struct{}

func (memo) Describe() sdk.Info { return sdk.Info{Name: "memo", Version: "1"} }

func (memo) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(_ context.Context, m sdk.Message) sdk.Verdict {
		fmt.Printf("memo: %s %s\n", m.Recipient, m.Payload)
		return sdk.Success(json.RawMessage(` + "`" + `{"by":"in-process"}` + "`" + `))
	}), nil
}

func main() {
	path := flag.String("config", "", "the config file")
	channel := flag.String("channel", "", "the channel to send one notification on")
	inProcess := flag.Bool("in-process", false, "serve the provider memo in process (else: plugins.dir's)")
	flag.Parse()
	if err := run(*path, *channel, *inProcess); err != nil {
		fmt.Fprintln(os.Stderr, "embedder:", err)
		os.Exit(1)
	}
}

func run(path, channel string, inProcess bool) (err error) {
	cfg, err := notifyd.LoadConfig(path)
	if err != nil {
		return err
	}
	var o notifyd.Options
	if inProcess {
		ps := notifyd.NewInProcess(map[string]sdk.Provider{"memo": memo{}}, nil)
		defer ps.Close() // after Stop
		o.Providers = ps
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := notifyd.Start(ctx, cfg, o)
	if err != nil {
		return err
	}
	defer func() {
		if serr := d.Stop(context.Background()); err == nil {
			err = serr
		}
	}()
	c, err := client.New("http://"+d.Addr().String(), cfg.HTTP.Tokens[0])
	if err != nil {
		return err
	}
	res, err := c.Enqueue(ctx, client.Notification{Channel: channel, Recipient: "ada", Payload: json.RawMessage(` + "`" + `{"text":"hello from outside"}` + "`" + `)})
	if err != nil {
		return err
	}
	for {
		n, err := c.Notification(ctx, res.ID)
		if err != nil {
			return err
		}
		switch n.Status {
		case wire.StatusSent:
			fmt.Printf("SENT %d %s\n", n.ID, n.Result)
			return nil
		case wire.StatusFailed:
			return fmt.Errorf("notification %d FAILED: %s", n.ID, n.LastError)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("notification %d still %s (%s): %w", n.ID, n.Status, n.LastError, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
`

// pluginMain is a provider plugin written outside the repository: the SDK
// alone, served with sdk.Serve.
const pluginMain = `// Command outside is a notifyd provider plugin: install it as
// notifyd-plugin-outside.
package main

import (
	"context"
	"encoding/json"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info { return sdk.Info{Name: "outside", Version: "1.0.0"} }

func (provider) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(_ context.Context, m sdk.Message) sdk.Verdict {
		return sdk.Success(json.RawMessage(` + "`" + `{"by":"outside-plugin"}` + "`" + `))
	}), nil
}

func main() { sdk.Serve(provider{}) }
`
