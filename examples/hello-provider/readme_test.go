package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEShowsThePlugin: the READMEs that show a hello plugin whole
// show it as it is.
func TestREADMEShowsThePlugin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ code, readme string }{
		{"main.go", "README.md"},
		{"main.go", filepath.Join("..", "..", "sdk", "README.md")},
		{filepath.Join("..", "hello-batch", "main.go"), filepath.Join("..", "hello-batch", "README.md")},
	} {
		code, err := os.ReadFile(c.code)
		if err != nil {
			t.Fatal(err)
		}
		readme, err := os.ReadFile(c.readme)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "```go\n"+string(code)+"```") {
			t.Errorf("%s does not show %s as it is: copy it whole into its go block", c.readme, c.code)
		}
	}
}
