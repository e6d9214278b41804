package examples

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/config"
)

// TestStandalone: every example config loads, takes its API token from the
// environment, and has a database schema, Redis prefix and port no other
// example has, so one example's notifications never show in another's.
func TestStandalone(t *testing.T) {
	files, err := filepath.Glob("*/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("example configs: %v %v", files, err)
	}
	env := []string{"NOTIFYD_API_TOKEN=standalone-test-token-0123", "KAKAO_ACCESS_TOKEN=x", "KAKAO_REFRESH_TOKEN=x", "KAKAO_REST_API_KEY=x"}
	owner := map[string]string{} // "schema x" → the directory using it
	for _, f := range files {
		cfg, err := config.Load(f, env)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		dir := filepath.Dir(f)
		if len(cfg.HTTP.Tokens) == 0 || cfg.HTTP.Tokens[0] != "standalone-test-token-0123" {
			t.Errorf("%s: http.tokens %v, want the token from NOTIFYD_API_TOKEN", f, cfg.HTTP.Tokens)
		}
		u, err := url.Parse(cfg.Postgres.URL)
		if err != nil {
			t.Errorf("%s: postgres.url: %v", f, err)
			continue
		}
		schema := u.Query().Get("search_path")
		if schema == "" {
			t.Errorf("%s: postgres.url sets no search_path: the example would share the default schema", f)
		}
		for _, k := range []string{"schema " + schema, "redis prefix " + cfg.Redis.Prefix, "listen " + cfg.HTTP.Listen} {
			if other, ok := owner[k]; ok && other != dir {
				t.Errorf("%s and %s share the %s", other, dir, strings.TrimSpace(k))
			}
			owner[k] = dir
		}
	}
}
