package backoff_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/backoff"
)

// recipeRE finds docs/config.md's retry recipes: a marker, then a yaml block.
var recipeRE = regexp.MustCompile("(?s)<!-- recipe: ([a-z-]+) -->\\s*```yaml\\n(.*?)```")

// TestRecipes loads each retry recipe of docs/config.md as a config file and
// checks the policy the engine builds from it against what the recipe
// promises, so the documentation cannot drift from the behaviour.
func TestRecipes(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	recipes := map[string]string{}
	for _, m := range recipeRE.FindAllStringSubmatch(string(doc), -1) {
		recipes[m[1]] = m[2]
	}
	type window struct{ lo, hi time.Duration }
	want := map[string]struct {
		channel string
		windows []window // the wait after each failed attempt but the last
	}{
		"fixed": {"quiz", []window{{5 * time.Minute, 5 * time.Minute}, {5 * time.Minute, 5 * time.Minute}, {5 * time.Minute, 5 * time.Minute}}},
		"windows": {"hooks", []window{{0, time.Second}, {time.Second, 2 * time.Second}, {2 * time.Second, 4 * time.Second},
			{4 * time.Second, 8 * time.Second}, {8 * time.Second, 16 * time.Second}}},
	}
	if len(recipes) != len(want) {
		t.Fatalf("docs/config.md has recipes %v, want exactly %d (fixed, windows)", recipes, len(want))
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "notifyd.yaml")
			file := "postgres: {url: \"postgres://x@127.0.0.1/x\"}\nredis: {url: \"redis://127.0.0.1:6379/0\"}\n" + recipes[name]
			if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path, []string{})
			if err != nil {
				t.Fatalf("recipe %s does not load: %v", name, err)
			}
			p := backoff.FromConfig(cfg.Channels[w.channel].Retry)
			retries := len(w.windows)
			for n := 1; n <= retries; n++ {
				if p.Exhausted(n) {
					t.Fatalf("attempt %d exhausts the policy; the recipe promises %d retries", n, retries)
				}
				lo, hi := p.Bounds(n)
				if lo != w.windows[n-1].lo || hi != w.windows[n-1].hi {
					t.Errorf("wait after attempt %d in [%s, %s], the recipe says [%s, %s]", n, lo, hi, w.windows[n-1].lo, w.windows[n-1].hi)
				}
			}
			if !p.Exhausted(retries + 1) {
				t.Errorf("attempt %d does not exhaust the policy: more than the promised %d retries before the DLQ", retries+1, retries)
			}
		})
	}
}
