//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// configureTokenFile configures a memo channel keeping its tokens in path and
// returns Configure's error, failing the test if Configure has not returned
// within a minute (it is left blocked then; unblock lets it go).
func configureTokenFile(t *testing.T, path string, unblock func()) error {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"mode": "memo", "refresh_token": testRefresh, "client_id": "c", "token_file": path})
	done := make(chan error, 1)
	go func() {
		s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: raw})
		if c, ok := s.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		unblock()
		t.Fatalf("Configure with token_file %s: no answer after a minute", filepath.Base(path))
		return nil
	}
}

// TestTokenFile_readBounded: token_file is read within maxTokenFile bytes, and
// only when it is a regular file: a FIFO nothing writes to held Configure in
// open(2) for good (the host's Configure deadline then failed the channel
// with nothing saying why), a device such as /dev/zero was read until memory
// ran out, a file of any size was read whole. Each is a config error naming
// token_file and what is wrong.
func TestTokenFile_readBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	saved, _ := json.Marshal(tokenFileData{AccessToken: "ACCESS-saved", RefreshToken: "REFRESH-saved", Seed: fingerprint(testRefresh)})

	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Let a Configure stuck in open(2) go: open the FIFO for writing
	// without blocking (it has a reader) and close it.
	unblock := func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
	t.Cleanup(unblock)

	big := filepath.Join(dir, "big.json")
	writeFile(t, big, string(saved)+strings.Repeat(" ", 1<<20)) // a token file padded to 1 MiB

	for name, tt := range map[string]struct{ path, want string }{
		"a FIFO":      {fifo, "not a regular file but a FIFO"},
		"a directory": {dir, "not a regular file but a directory"},
		"/dev/null":   {"/dev/null", "not a regular file but a device"},
		"1 MiB":       {big, "more than"},
	} {
		err := configureTokenFile(t, tt.path, unblock)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != "token_file" || !strings.Contains(ce.Reason, tt.want) {
			t.Errorf("token_file %s: error = %v; want a config error for token_file saying %q", name, err, tt.want)
		}
	}

	// A token file of the plugin's is read as before.
	ok := filepath.Join(dir, "ok.json")
	writeFile(t, ok, string(saved))
	if _, access, refresh, found, err := openTokenFile(ok, testRefresh); err != nil || !found || access != "ACCESS-saved" || refresh != "REFRESH-saved" {
		t.Errorf("a saved token file: found %v, %v; want its tokens", found, err)
	}
}

// TestTokenFile_saveWithinBound: save never writes a file openTokenFile would
// refuse as too big; the tokens the plugin takes from Kakao (at most
// maxAccessToken bytes each, escaped at worst) always fit.
func TestTokenFile_saveWithinBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "t.json")
	tf, _, _, _, err := openTokenFile(path, testRefresh)
	if err != nil {
		t.Fatal(err)
	}
	worst := strings.Repeat("<", maxAccessToken) // json.Marshal writes each as \u003c
	if err := tf.save(worst, worst); err != nil {
		t.Fatalf("save of two %d-byte tokens: %v", maxAccessToken, err)
	}
	if _, access, refresh, found, err := openTokenFile(path, testRefresh); err != nil || !found || access != worst || refresh != worst {
		t.Errorf("reading back two %d-byte tokens: found %v, %v; want them", maxAccessToken, found, err)
	}
	huge := strings.Repeat("r", maxTokenFile)
	if err := tf.save("a", huge); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("save of a %d-byte refresh token: %v; want it refused, past the file's bound", len(huge), err)
	}
	if _, _, refresh, _, err := openTokenFile(path, testRefresh); err != nil || refresh != worst {
		t.Errorf("after the refused save: %v; want the file as it was", err)
	}
}
