package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk/client"
)

// `status -o json` printed through a json.Encoder with SetIndent, which
// indents the payload too, and indentation grows with the square of the
// nesting: a 24 KB payload of arrays 3,000 deep printed 72 MB, a 1 MiB
// payload of 9,000-deep chains (within the API's bounds) about 9 GB to the
// operator's terminal. Output past twice its size is printed on one line
// (jsonindent.Fits, the dashboard's rule); it is the same JSON.
func TestCLI_StatusJSONNestedPayload(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	chain := strings.Repeat("[", 3000) + strings.Repeat("]", 3000)
	payload := "[" + strings.Repeat(chain+",", 3) + chain + "]" // 24 KB
	var id int64
	if err := b.db.Pool.QueryRow(t.Context(), `
INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
VALUES ('quiz', 'nested@example.com', $1::jsonb, 'FAILED', 1, 'test: nested payload')
RETURNING id`, payload).Scan(&id); err != nil {
		t.Fatal(err)
	}
	out := b.ok("status", fmt.Sprint(id), "-o", "json")
	if bound := 2*len(payload) + 1<<20; len(out) > bound {
		t.Fatalf("status -o json of a %d-byte payload printed %d bytes, want at most %d: its indentation grows with the square of the nesting",
			len(payload), len(out), bound)
	}
	var ns []client.NotificationInfo
	if err := json.Unmarshal([]byte(out), &ns); err != nil || len(ns) != 1 || ns[0].ID != id {
		t.Fatalf("status -o json: %v (%d notifications), want the one notification as JSON", err, len(ns))
	}
	if !strings.Contains(string(ns[0].Payload), "[[[[[[[[") {
		t.Errorf("the output does not hold the payload")
	}

	// A payload of ordinary nesting is still indented.
	plain := strings.TrimSpace(b.ok("send", "--channel", "quiz", "--recipient", "r", "--payload", `{"a":[1,2]}`, "--at", "1h"))
	if out := b.ok("status", plain, "-o", "json"); !strings.Contains(out, "\n    \"id\": ") {
		t.Errorf("status -o json of a plain notification is not indented:\n%s", out)
	}
}
