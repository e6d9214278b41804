package main

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
)

// exitCode is the code notifyd exits with for err (0 for nil).
func exitCode(err error) int {
	var ex *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ex):
		return ex.code
	default:
		return 1
	}
}

// notifyd status answers every id it is given: a row for each one found, an
// error line for each missing one, and exit 1 when any is missing — through
// the API and with --config.
func TestCLI_StatusAnswersEveryID(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	var ids []string
	for _, r := range []string{"ann", "bob"} {
		ids = append(ids, strings.TrimSpace(b.ok("send", "--channel", "quiz", "--recipient", r, "--payload", `{}`, "--at", "1h")))
	}
	args := []string{"status", ids[0], "987654321", ids[1], "987654322"}
	for _, mode := range [][]string{nil, {"--config", b.path}, {"-o", "json"}} {
		out, errOut, err := b.run(append(args, mode...)...)
		wantLines(t, out, ids[0], ids[1], "ann", "bob")
		wantLines(t, errOut, "error: notification 987654321 does not exist\n", "error: notification 987654322 does not exist\n")
		if exitCode(err) != 1 || !strings.Contains(err.Error(), "2 of 4 notification(s) not found") {
			t.Errorf("status %v: %v, want exit 1 counting the missing ids", mode, err)
		}
	}
	// Nothing found: no empty table, the error lines and exit 1.
	out, errOut, err := b.run("status", "987654321")
	if out != "" || !strings.Contains(errOut, "987654321 does not exist") || exitCode(err) != 1 {
		t.Errorf("status of a missing id: %q, %q, %v", out, errOut, err)
	}
	wantLines(t, b.ok("status", ids[0], ids[1]), "ann", "bob") // all found: exit 0
}

// A CLI pointed at a port nobody listens on says which address it tried
// and how to change it.
func TestCLI_Unreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"status", "1"}, {"channels"}, {"send", "--channel", "c", "--recipient", "r", "--payload", "{}"}, {"cancel", "1", "2"}} {
		root := newRoot()
		root.SetOut(&strings.Builder{})
		root.SetErr(&strings.Builder{})
		root.SetArgs(append(args, "--addr", addr, "--token", cliToken))
		err := root.ExecuteContext(testenv.Context(t))
		want := fmt.Sprintf("cannot reach notifyd at %s (set --addr or NOTIFYD_ADDR): connection refused", addr)
		if err == nil || plainError(err).Error() != want {
			t.Errorf("notifyd %s: %v\nwant: %s", strings.Join(args, " "), err, want)
		}
	}
}

// A channel whose plugin is missing shows stopped with its reason in
// notifyd channels, and a send to it prints the API's warning on stderr
// (the notification is still taken: its id on stdout).
func TestCLI_StoppedChannel(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, apiStarted)
	out, errOut, err := b.run("channels")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^relay .*$`).FindString(out)
	if !strings.Contains(row, "stopped: plugin relay") { // cut to fit; the whole reason follows on stderr
		t.Errorf("channels: relay's row %q, want stopped with its reason:\n%s", row, out)
	}
	if q := regexp.MustCompile(`(?m)^quiz .*$`).FindString(out); !strings.Contains(q, "running") {
		t.Errorf("channels: quiz's row %q, want running", q)
	}
	wantLines(t, errOut, "warning: channel relay (plugin relay) is stopped on this instance", "notifyd-plugin-relay in plugins.dir")
	if strings.Contains(errOut, "quiz") {
		t.Errorf("channels warns of the running channel quiz: %s", errOut)
	}

	out, errOut, err = b.run("send", "--channel", "relay", "--recipient", "r", "--payload", "{}")
	if _, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64); err != nil || perr != nil {
		t.Fatalf("send to a stopped channel: %q, %v; want its id", out, err)
	}
	wantLines(t, errOut, "warning: channel relay is stopped on this instance: ", "no such plugin executable", "the notification is kept")
	if _, errOut, _ := b.run("send", "--channel", "quiz", "--recipient", "r", "--payload", "{}"); errOut != "" {
		t.Errorf("send to a running channel printed %q on stderr", errOut)
	}
}
