package api_test

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/notifyd/notifyd/internal/api"
)

type openAPIDoc struct {
	OpenAPI string                    `yaml:"openapi"`
	Paths   map[string]map[string]any `yaml:"paths"`
}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

func loadOpenAPI(t *testing.T) (openAPIDoc, []byte) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDoc
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml is not valid YAML: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q, want 3.x", doc.OpenAPI)
	}
	return doc, raw
}

// TestOpenAPI_EveryRoute checks docs/openapi.yaml against the routes the
// server registers, both ways: no route undocumented, no documented route
// that does not exist.
func TestOpenAPI_EveryRoute(t *testing.T) {
	t.Parallel()
	doc, _ := loadOpenAPI(t)
	var documented []string
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains(httpMethods, key) {
				documented = append(documented, strings.ToUpper(key)+" "+path)
			}
		}
	}
	sort.Strings(documented)
	routes := api.Routes()
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in docs/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("docs/openapi.yaml documents %s, which the server does not serve", d)
		}
	}
	if len(routes) < 18 {
		t.Errorf("only %d routes registered, want the 18 of the issue", len(routes))
	}
}

// TestOpenAPI_Operations checks each operation: path parameters declared,
// a 401 on every token-protected route, a 503 on every route, answers with status codes the API
// uses, and every $ref pointing at a component that exists.
func TestOpenAPI_Operations(t *testing.T) {
	t.Parallel()
	doc, raw := loadOpenAPI(t)
	var full map[string]any
	if err := yaml.Unmarshal(raw, &full); err != nil {
		t.Fatal(err)
	}
	allowed := []string{"200", "202", "204", "400", "401", "404", "409", "413", "422", "429", "501", "503"}
	wildcard := regexp.MustCompile(`\{(\w+)\}`)
	for path, item := range doc.Paths {
		for method, v := range item {
			op, _ := v.(map[string]any)
			if !slices.Contains(httpMethods, method) {
				continue
			}
			name := strings.ToUpper(method) + " " + path
			responses, _ := op["responses"].(map[string]any)
			if len(responses) == 0 {
				t.Errorf("%s: no responses", name)
			}
			for code := range responses {
				if !slices.Contains(allowed, code) {
					t.Errorf("%s: response %s is not a status the API answers with", name, code)
				}
			}
			// An outage or the connection bounds can answer any route 503.
			if _, ok := responses["503"]; !ok {
				t.Errorf("%s: documents no 503 (Postgres or Redis unreachable; Retry-After)", name)
			}
			if strings.HasPrefix(path, "/v1/") || path == "/metrics" {
				if _, ok := responses["401"]; !ok {
					t.Errorf("%s: needs a token but documents no 401", name)
				}
			}
			declared := paramNames(full, op["parameters"], item["parameters"])
			for _, m := range wildcard.FindAllStringSubmatch(path, -1) {
				if !slices.Contains(declared, m[1]) {
					t.Errorf("%s: path parameter {%s} is not declared (declared: %v)", name, m[1], declared)
				}
			}
		}
	}
	for _, ref := range regexp.MustCompile(`\$ref: "(#/[^"]+)"`).FindAllStringSubmatch(string(raw), -1) {
		if resolve(full, ref[1]) == nil {
			t.Errorf("$ref %s does not resolve", ref[1])
		}
	}
}

// resolve follows a local $ref ("#/components/...") in doc.
func resolve(doc map[string]any, ref string) any {
	var node any = doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[part]
	}
	return node
}

// paramNames are the names of the parameters in lists, $refs resolved.
func paramNames(doc map[string]any, lists ...any) []string {
	var out []string
	for _, l := range lists {
		ps, _ := l.([]any)
		for _, p := range ps {
			m, _ := p.(map[string]any)
			if ref, ok := m["$ref"].(string); ok {
				m, _ = resolve(doc, ref).(map[string]any)
			}
			if name, ok := m["name"].(string); ok {
				out = append(out, name)
			}
		}
	}
	return out
}
