package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// tokenFile persists a channel's current tokens across plugin restarts. Kakao
// expires a refresh token as soon as it issues a new one, so without it a
// restart after a rotation would start from a dead refresh_token.
//
// The file records a fingerprint of the config's refresh_token it descends
// from: when the operator puts a new refresh_token in the config, the file is
// stale and the config wins.
type tokenFile struct {
	path string
	seed string // fingerprint of the config's refresh_token
}

type tokenFileData struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	Seed         string    `json:"seed"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// fingerprint identifies a token without revealing it.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte("notifyd-kakao\x00" + token))
	return hex.EncodeToString(sum[:8])
}

// openTokenFile checks the file's directory and loads the tokens it holds
// (ok false when there is no file, or it descends from another refresh_token).
func openTokenFile(path, configRefreshToken string) (tf *tokenFile, access, refresh string, ok bool, err error) {
	tf = &tokenFile{path: path, seed: fingerprint(configRefreshToken)}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return nil, "", "", false, &ConfigError{Key: "token_file", Reason: fmt.Sprintf("directory of %q does not exist", path)}
	}
	b, err := readTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return tf, "", "", false, nil
	}
	if err != nil {
		return nil, "", "", false, &ConfigError{Key: "token_file", Reason: fmt.Sprintf("read %q: %v", path, err)}
	}
	var d tokenFileData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, "", "", false, &ConfigError{Key: "token_file", Reason: fmt.Sprintf("%q is not a token file written by this plugin (%v); delete it to start from the config's tokens", path, err)}
	}
	if d.Seed != tf.seed || d.RefreshToken == "" {
		return tf, "", "", false, nil
	}
	return tf, d.AccessToken, d.RefreshToken, true, nil
}

// maxTokenFile bounds the bytes of token_file read (and written). The file
// holds two tokens and a few short fields: the tokens the plugin takes from
// Kakao are at most maxAccessToken bytes each, under 2×6×maxAccessToken
// (48 KiB) however JSON escapes them; Kakao's own are under 100 bytes.
const maxTokenFile = 64 << 10

// readTokenFile reads path, a regular file of at most maxTokenFile bytes.
// It is opened without blocking, so a FIFO nothing writes to (open(2) would
// wait for a writer for good) is refused as a device is (/dev/zero would be
// read until memory ran out). A symbolic link to a regular file is read.
func readTokenFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if m := st.Mode(); !m.IsRegular() {
		what := "a special file"
		switch {
		case m.IsDir():
			what = "a directory"
		case m&fs.ModeNamedPipe != 0:
			what = "a FIFO"
		case m&fs.ModeSocket != 0:
			what = "a socket"
		case m&fs.ModeDevice != 0:
			what = "a device"
		}
		return nil, fmt.Errorf("not a regular file but %s", what)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTokenFile {
		return nil, fmt.Errorf("more than %d bytes, which no token file of this plugin holds; delete it to start from the config's tokens", maxTokenFile)
	}
	return b, nil
}

// save writes the tokens atomically, readable by the plugin's user only. It
// refuses to write more than openTokenFile reads back.
func (tf *tokenFile) save(access, refresh string) error {
	b, err := json.Marshal(tokenFileData{AccessToken: access, RefreshToken: refresh, Seed: tf.seed, UpdatedAt: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("encode tokens: %w", err)
	}
	if len(b) > maxTokenFile {
		return fmt.Errorf("the tokens take %d bytes, more than token_file's %d: not saved", len(b), maxTokenFile)
	}
	tmp, err := os.CreateTemp(filepath.Dir(tf.path), ".kakao-tokens-*")
	if err != nil {
		return fmt.Errorf("create temp token file: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod temp token file: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write temp token file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync temp token file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temp token file: %w", err)
	}
	if err := os.Rename(tmp.Name(), tf.path); err != nil {
		return fmt.Errorf("replace token file: %w", err)
	}
	return nil
}
