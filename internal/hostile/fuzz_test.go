package hostile

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// randomRequests and cliRequests size the fuzz: with the edges, about 400
// requests, well under a minute on two cores.
const (
	randomRequests = 300
	cliRequests    = 12
)

// fuzz sends the edges (each with the answer it must get), then a seeded
// stream of hostile requests and CLI commands. No answer may be a 5xx or
// missing; every notification accepted must reach a final state.
func fuzz(t *testing.T, d *daemon) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NOTIFYD_HOSTILE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("NOTIFYD_HOSTILE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay: NOTIFYD_HOSTILE_SEED=%d go test ./internal/hostile -run TestHostile -v)", seed, seed)
	g := newGen(seed)

	var (
		accepted []int64
		fivexx   []string // 5xx or no answer at all
		wrong    []string // an edge's answer was not the one it must get
		sent     int
	)
	do := func(q request) (int, string) {
		sent++
		status, answer := d.raw(t, q.method, q.target, q.body)
		if status >= 500 || status == 0 {
			fivexx = append(fivexx, fmt.Sprintf("%s %.120q → %d %.300s\n    body %.200q", q.method, q.target, status, answer, q.body))
		}
		if q.method == "POST" && q.target == "/v1/notifications" && status >= 200 && status < 300 {
			accepted = append(accepted, ids(answer)...)
		}
		return status, answer
	}

	for _, q := range g.edges() {
		status, answer := do(q)
		ok := true
		switch {
		case q.want == "2xx":
			ok = status >= 200 && status < 300
		case strings.HasPrefix(q.want, "4xx:"):
			ok = is4xxNaming(status, answer, strings.TrimPrefix(q.want, "4xx:"))
		}
		if testing.Verbose() {
			t.Logf("edge %s %.60q (body %.60q) → %d %.160s", q.method, q.target, q.body, status, answer)
		}
		if !ok {
			wrong = append(wrong, fmt.Sprintf("%s %.120q (body %.120q) → %d %.300s; want %s", q.method, q.target, q.body, status, answer, q.want))
		}
	}
	for range randomRequests {
		q := g.request()
		status, _ := do(q)
		// A pause is resumed after a request or two: the notifications it
		// held must still be delivered.
		if strings.HasSuffix(q.target, "/pause") && status == 200 {
			name := strings.TrimSuffix(strings.TrimPrefix(q.target, "/v1/channels/"), "/pause")
			for range g.r.IntN(3) {
				do(g.request())
			}
			do(request{"POST", "/v1/channels/" + name + "/resume", nil, "2xx"})
		}
	}
	for _, args := range g.cliCommands(cliRequests) {
		sent++
		out, err := d.cli(args...)
		if cli5xx.MatchString(out) {
			fivexx = append(fivexx, fmt.Sprintf("notifyd %.300q → %v %.300s", args, err, out))
		}
		if args[0] == "send" && err == nil {
			if id, perr := strconv.ParseInt(strings.Fields(out)[0], 10, 64); perr == nil {
				accepted = append(accepted, id)
			}
		}
	}
	// Whatever the stream left paused is resumed, as an operator would.
	for _, ch := range []string{"hooks", "refused"} {
		if out, err := d.cli("channels", "resume", ch); err != nil {
			t.Errorf("notifyd channels resume %s: %v %s", ch, err, out)
		}
	}

	if len(fivexx) > 0 {
		t.Errorf("%d of %d requests answered 5xx or not at all (seed %d):\n%s", len(fivexx), sent, seed, strings.Join(fivexx, "\n"))
	}
	if len(wrong) > 0 {
		t.Errorf("%d edges got the wrong answer (seed %d):\n%s", len(wrong), seed, strings.Join(wrong, "\n"))
	}
	d.alive(t)
	slices.Sort(accepted)
	accepted = slices.Compact(accepted)
	if len(accepted) < batchBound {
		t.Fatalf("the fuzz had %d notifications accepted (seed %d), fewer than the edges' own batch: it tested little end to end", len(accepted), seed)
	}
	t.Logf("%d requests, %d distinct notifications accepted", sent, len(accepted))

	// Those scheduled far ahead are cancelled, a final state too.
	for _, id := range accepted {
		n, err := d.c.Notification(context.Background(), id)
		if err != nil {
			t.Errorf("GET /v1/notifications/%d: %v", id, err)
			continue
		}
		if n.Status == "PENDING" && n.DueAt.After(time.Now().Add(time.Hour)) {
			if _, err := d.c.Cancel(context.Background(), id); err != nil {
				t.Errorf("cancel notification %d, scheduled for %s: %v", id, n.DueAt, err)
			}
		}
	}
	final := d.waitFinal(t, accepted, 60*time.Second)
	counts := map[string]int{}
	for _, n := range final {
		counts[n.Status]++
	}
	t.Logf("final: %v", counts)
}
