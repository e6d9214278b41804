package main

import (
	"strings"
	"testing"
)

// TestHints_nameAcceptedFlags: the no-token hint suggests --config only to
// commands that take it; every command that says "--config" accepts it.
func TestHints_nameAcceptedFlags(t *testing.T) {
	t.Setenv(envToken, "")
	for _, args := range [][]string{
		{"dlq", "list"}, {"channels"}, {"schedules"}, {"status", "1"}, {"jobs"}, {"subscribers", "get", "u1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, err := runCLI(t, "", args...)
			if err == nil || !strings.Contains(err.Error(), "no API token") {
				t.Fatalf("%v without a token: %v, want the no-token hint", args, err)
			}
			cmd, _, ferr := newRoot().Find(args)
			if ferr != nil {
				t.Fatal(ferr)
			}
			takesConfig := cmd.Flags().Lookup("config") != nil
			if says := strings.Contains(err.Error(), "--config"); says != takesConfig {
				t.Errorf("%v: hint %q mentions --config: %v; the command takes --config: %v", args, err, says, takesConfig)
			}
		})
	}
}
