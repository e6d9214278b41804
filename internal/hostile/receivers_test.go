package hostile

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// garbage is what a broken or hostile receiver answers: NUL, invalid UTF-8,
// a lone surrogate's bytes, control characters.
const garbage = "bad \x00 request \xff\xfe\xed\xa0\x80 \x1b[31m"

// oddReceiver answers by the recipient's prefix, as a hostile or broken
// provider would: garbage bodies with 400 (final) and 503 (retried), 20 MB
// bodies, a binary 200, a Retry-After of years, a hang past the timeout.
func oddReceiver(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var env struct {
		Recipient string `json:"recipient"`
	}
	_ = json.Unmarshal(body, &env)
	kind, _, _ := strings.Cut(env.Recipient, "-")
	switch kind {
	case "g400":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, strings.Repeat(garbage, 1000))
	case "g503":
		w.Header().Set("Retry-After", "9300000000")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, garbage)
	case "big400":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, strings.Repeat("e", 20<<20))
	case "big200":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"`+strings.Repeat("i", 20<<20)+`"}`)
	case "bin200":
		_, _ = io.WriteString(w, strings.Repeat(garbage, 100))
	case "hang":
		time.Sleep(3 * time.Second) // past the slow channel's 2 s timeout
	case "r501":
		w.WriteHeader(http.StatusNotImplemented)
	}
}

// receivers sends to the odd receiver: every notification must end final,
// its last_error valid UTF-8 without NUL and bounded, its result bounded,
// and normal notifications on another channel delivered meanwhile.
func receivers(t *testing.T, d *daemon) {
	cases := map[string]string{ // recipient prefix → the final status it must reach
		"g400": "FAILED", "g503": "FAILED", "big400": "FAILED", "big200": "SENT",
		"bin200": "SENT", "hang": "FAILED", "r501": "FAILED",
	}
	var ids []int64
	want := map[int64]string{}
	for prefix, status := range cases {
		channel := "odd"
		if prefix == "hang" {
			channel = "slow"
		}
		for _, id := range enqueueTo(t, d, channel, prefix, 3) {
			ids = append(ids, id)
			want[id] = prefix + " " + status
		}
	}
	normal := enqueueOK(t, d, "hooks", 20)
	logged := map[string]bool{}
	for id, n := range d.waitFinal(t, append(ids, normal...), 60*time.Second) {
		w, odd := want[id]
		if !odd {
			if n.Status != "SENT" {
				t.Errorf("notification %d beside the odd receiver: %s (%q), want SENT", id, n.Status, n.LastError)
			}
			continue
		}
		prefix, status, _ := strings.Cut(w, " ")
		if testing.Verbose() && !logged[prefix] {
			logged[prefix] = true
			t.Logf("%s: %s after %d attempts, last_error %d bytes %.160q, result %d bytes", prefix, n.Status, n.Attempts, len(n.LastError), n.LastError, len(n.Result))
		}
		if n.Status != status {
			t.Errorf("%s: notification %d %s (%.200q), want %s", prefix, id, n.Status, n.LastError, status)
		}
		if !utf8.ValidString(n.LastError) || strings.ContainsRune(n.LastError, 0) || len(n.LastError) > 4096 {
			t.Errorf("%s: notification %d's last_error is %d bytes, valid UTF-8 %v, %.200q; want valid UTF-8 without NUL, at most 4 KiB",
				prefix, id, len(n.LastError), utf8.ValidString(n.LastError), n.LastError)
		}
		if len(n.Result) > 4<<20 {
			t.Errorf("%s: notification %d's result is %d bytes, over 4 MiB", prefix, id, len(n.Result))
		}
	}
	d.alive(t)
}
