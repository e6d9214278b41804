package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/internal/ui"
	"github.com/notifyd/notifyd/sdk/wire"
)

// TestDoors_Imports: the API and the dashboard are doors over
// service.Operations; neither imports a store, a queue, the plugin host, the
// delivery engine or the schedule service itself (their non-test files).
func TestDoors_Imports(t *testing.T) {
	t.Parallel()
	forbidden := []string{"outbox", "queue", "pluginhost", "delivery", "schedule"}
	for _, pkg := range []string{"github.com/notifyd/notifyd/internal/api", "github.com/notifyd/notifyd/internal/ui"} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		imports := strings.Fields(string(out))
		if !slices.Contains(imports, "github.com/notifyd/notifyd/internal/service") {
			t.Errorf("%s does not import internal/service: is `go list` reading the right module? imports %v", pkg, imports)
		}
		for _, f := range forbidden {
			if slices.Contains(imports, "github.com/notifyd/notifyd/internal/"+f) {
				t.Errorf("%s imports internal/%s; a door reaches the machinery only through service.Operations", pkg, f)
			}
		}
	}
}

// TestDoors_SameAnswer: the dead letters of a channel, asked through the API
// and through the dashboard over one service, are the same rows in the same
// order with the same attempts.
func TestDoors_SameAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	sched, err := schedule.New(b.store.Pool(), b.cfg, schedule.Options{})
	must(t, err)
	ops, err := service.New(service.Options{Config: b.cfg, Store: b.store, Engine: b.engine, Schedules: sched, Redis: b.rds.Client})
	must(t, err)
	dashboard, err := ui.New(ui.Deps{Config: b.cfg, Ops: ops})
	must(t, err)
	srv, err := api.New(api.Options{Config: b.cfg, Ops: ops, UI: dashboard})
	must(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	var ns []outbox.NewNotification
	for i := range 7 {
		ch := "orders"
		if i%3 == 0 {
			ch = "alerts"
		}
		ns = append(ns, outbox.NewNotification{Channel: ch, Recipient: "r" + strconv.Itoa(i), Payload: json.RawMessage(`{}`)})
	}
	in, err := b.store.Insert(b.ctx, ns)
	must(t, err)
	var ids []int64
	for i, r := range in {
		if i != 4 { // one stays PENDING: not a dead letter
			ids = append(ids, r.ID)
		}
	}
	_, err = b.db.Pool.Exec(b.ctx, `UPDATE notifications SET status = 'FAILED', attempts = 3, last_error = 'HTTP 400' WHERE id = ANY($1)`, ids)
	must(t, err)

	// The API's answer.
	a := wantStatus(t, serve(t, srv, "GET", "/v1/dlq?channel=orders", "Bearer "+tokenA, ""), 200)
	page := decode[wire.DLQPage](t, a)
	var apiIDs, apiAttempts []int64
	for _, n := range page.Notifications {
		apiIDs, apiAttempts = append(apiIDs, n.ID), append(apiAttempts, int64(n.Attempts))
	}
	if len(apiIDs) != 3 {
		t.Fatalf("the API lists %d dead letters of orders, want 3: %s", len(apiIDs), a.body)
	}

	// The dashboard's answer, logged in with the same token.
	jar, err := cookiejar.New(nil)
	must(t, err)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(hs.URL+"/ui/login", url.Values{"token": {tokenA}, "next": {"/ui/"}})
	must(t, err)
	res.Body.Close()
	res, err = c.Get(hs.URL + "/ui/dead?channel=orders")
	must(t, err)
	defer res.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(res.Body)
	must(t, err)
	if res.StatusCode != 200 {
		t.Fatalf("dashboard dead letters: %d %.300s", res.StatusCode, body.String())
	}
	row := regexp.MustCompile(`(?s)<tr id="dead-(\d+)">.*?<td class="num">(\d+)</td>`)
	var uiIDs, uiAttempts []int64
	for _, m := range row.FindAllStringSubmatch(body.String(), -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		n, _ := strconv.ParseInt(m[2], 10, 64)
		uiIDs, uiAttempts = append(uiIDs, id), append(uiAttempts, n)
	}
	if !slices.Equal(uiIDs, apiIDs) || !slices.Equal(uiAttempts, apiAttempts) {
		t.Errorf("the dashboard shows ids %v attempts %v; the API answers ids %v attempts %v", uiIDs, uiAttempts, apiIDs, apiAttempts)
	}
}
