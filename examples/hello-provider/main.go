// Command hello-provider is the smallest complete notifyd provider plugin:
// it appends every message it is given to a file, one JSON line each. Build
// it as notifyd-plugin-hello into notifyd's plugins.dir (see README.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info {
	return sdk.Info{
		Name:         "hello",
		Version:      "1.0.0",
		ConfigSchema: json.RawMessage(`{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`),
	}
}

// Configure is called once per channel that uses the plugin.
func (provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		Path string `json:"path"` // the file to append messages to
	}
	if err := req.Decode(&cfg); err != nil { // unknown keys and wrong types are errors
		return nil, err
	}
	if cfg.Path == "" {
		return nil, errors.New("config.path is required: the file to append messages to")
	}
	f, err := os.OpenFile(cfg.Path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("config.path: %w", err)
	}
	req.Logger.Info("appending messages", "path", cfg.Path)
	return &sender{f: f}, nil
}

type sender struct {
	mu sync.Mutex // Send runs concurrently
	f  *os.File
}

func (s *sender) Send(_ context.Context, m sdk.Message) sdk.Verdict {
	if m.Recipient == "" {
		return sdk.Permanent("recipient is empty") // retrying cannot fix this
	}
	line, err := json.Marshal(map[string]any{"id": m.ID, "recipient": m.Recipient, "payload": m.Payload})
	if err != nil {
		return sdk.Permanent("payload: " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(append(line, '\n')); err != nil {
		return sdk.Transient("append: " + err.Error()) // a full disk may clear up
	}
	return sdk.Success(nil)
}

func main() { sdk.Serve(provider{}) }
