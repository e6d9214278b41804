package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/notifyd/notifyd/internal/testenv"
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

// A payload and a result reach the CLI as JSON it does not decode
// (json.RawMessage), so bytes that are not UTF-8 came through them as sent:
// a server (or a proxy) answering `"t":"\x9b2J"` — a raw 0x9b, CSI on a
// terminal that reads 8-bit controls — had `status -o json` and `dlq list
// -o json` write it raw, where the table printed it as \x9b. Every -o json
// writes such a byte as \ufffd, as encoding/json writes one it decodes.
func TestCLI_JSONRawBytesEscaped(t *testing.T) {
	t.Parallel()
	raw := "{\"t\":\"\x9b2J\x1b\"}"
	raw = strings.Replace(raw, "\x1b", "\xc2", 1) // half a UTF-8 sequence too
	body := `{"id":7,"channel":"quiz","recipient":"r","payload":` + raw + `,"result":` + raw + `,"status":"FAILED","attempts":1}`
	addr, _ := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/notifications/7":
			_, _ = io.WriteString(w, body)
		case "/v1/dlq":
			_, _ = io.WriteString(w, `{"notifications":[`+body+`]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no route"}}`)
		}
	})
	for _, args := range [][]string{{"status", "7", "-o", "json"}, {"dlq", "list", "-o", "json"}} {
		out, errOut, err := runAt(testenv.Context(t), addr, args...)
		if err != nil {
			t.Fatalf("notifyd %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		if !utf8.ValidString(out) || hasControl(out) {
			t.Errorf("notifyd %s wrote bytes that are no UTF-8 (or controls) raw:\n%q", strings.Join(args, " "), out)
		}
		if !json.Valid([]byte(out)) || !strings.Contains(out, `\ufffd2J`) {
			t.Errorf("notifyd %s: want the same JSON with the stray bytes as \\ufffd:\n%s", strings.Join(args, " "), out)
		}
	}
}
