// Command behave is a test plugin whose messages say what it should do:
// a payload {"crash":true} exits the process mid-batch, {"hang":true} never
// returns, {"fail":"why"} is PERMANENT, {"say":"text"} succeeds with text
// as its detail ({"say":"text","transient":true}: TRANSIENT with it),
// {"wait":"/path"} is held, as a slow provider holds a request, until that
// file exists (then SUCCESS) or its deadline (TRANSIENT, its context's
// error); anything else succeeds with the process id as result. Its channel config
// needs "name"; "health" makes its provider health check slow ("slow") or
// fail (any other text).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info {
	return sdk.Info{Name: "behave", Version: "1.0.0", MaxConcurrency: 16}
}

func (provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		Name   string `json:"name"`
		Health string `json:"health"`
		Refuse string `json:"refuse"`
	}
	if err := req.Decode(&cfg); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		return nil, errors.New("config.name is required")
	}
	if cfg.Refuse != "" {
		if _, err := os.Stat(cfg.Refuse); err == nil {
			return nil, errors.New(latin1("clé d'API refusée"))
		}
	}
	req.Logger.Info("configured", "name", cfg.Name)
	if cfg.Health != "" {
		return checked{health: cfg.Health}, nil
	}
	return sender{}, nil
}

type sender struct{}

// checked is a sender whose provider health check the config decides.
type checked struct {
	sender
	health string
}

func (c checked) Health(ctx context.Context) error {
	if c.health == "slow" {
		<-ctx.Done() // a provider that does not answer
		return ctx.Err()
	}
	return errors.New(c.health)
}

var result = json.RawMessage(fmt.Sprintf(`{"pid":%d}`, os.Getpid()))

func (sender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	if !bytes.Contains(m.Payload, []byte(`"crash"`)) && !bytes.Contains(m.Payload, []byte(`"hang"`)) &&
		!bytes.Contains(m.Payload, []byte(`"fail"`)) && !bytes.Contains(m.Payload, []byte(`"say"`)) &&
		!bytes.Contains(m.Payload, []byte(`"wait"`)) {
		return sdk.Success(result) // the no-op path benchmarks measure
	}
	var p struct {
		Crash     bool   `json:"crash"`
		Hang      bool   `json:"hang"`
		Fail      string `json:"fail"`
		Latin1    bool   `json:"latin1"`
		Say       string `json:"say"`
		Transient bool   `json:"transient"`
		Wait      string `json:"wait"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return sdk.Permanent("payload: " + err.Error())
	}
	switch {
	case p.Crash:
		fmt.Fprintln(os.Stderr, "behave: crashing on message", m.ID)
		os.Exit(3)
	case p.Hang:
		select {}
	case p.Wait != "":
		for {
			if _, err := os.Stat(p.Wait); err == nil {
				return sdk.Success(result)
			}
			select {
			case <-ctx.Done():
				return sdk.Transient(ctx.Err().Error())
			case <-time.After(10 * time.Millisecond):
			}
		}
	case p.Fail != "" && p.Latin1:
		return sdk.Permanent(latin1(p.Fail))
	case p.Fail != "":
		return sdk.Permanent(p.Fail)
	case p.Say != "" && p.Transient:
		return sdk.Transient(p.Say)
	case p.Say != "":
		v := sdk.Success(result)
		v.Detail = p.Say
		return v
	}
	return sdk.Success(result)
}

// latin1 is s in ISO 8859-1: a byte a character (those past U+00FF as '?').
func latin1(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			r = '?'
		}
		b = append(b, byte(r))
	}
	return string(b)
}

func main() { sdk.Serve(provider{}) }
