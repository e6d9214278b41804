// Command batchhook is a test plugin whose Sender is an sdk.BatchSender: it
// POSTs each batch as ONE request, {"items":[{"id":…,"recipient":…},…]}, to
// the channel's config.url, and reads the answer per item by id (in any
// order): {"results":[{"id":…,"status":"ok"|"retry"|"fail"}]}. A non-2xx
// answer is TRANSIENT for every item of the request; an item the answer does
// not name is TRANSIENT. A success's result is {"id":<the item's id>}, so a
// test can see each verdict went to its own message.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info { return sdk.Info{Name: "batchhook", Version: "1.0.0"} }

func (provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		URL string `json:"url"`
	}
	if err := req.Decode(&cfg); err != nil {
		return nil, err
	}
	if cfg.URL == "" {
		return nil, errors.New("config.url is required")
	}
	return sender{url: cfg.URL}, nil
}

type sender struct{ url string }

func (s sender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	return s.SendBatch(ctx, []sdk.Message{m})[0]
}

type item struct {
	ID        int64  `json:"id"`
	Recipient string `json:"recipient,omitempty"`
	Status    string `json:"status,omitempty"`
}

func (s sender) SendBatch(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	items := make([]item, len(ms))
	for i, m := range ms {
		items[i] = item{ID: m.ID, Recipient: m.Recipient}
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	all := func(v sdk.Verdict) []sdk.Verdict {
		vs := make([]sdk.Verdict, len(ms))
		for i := range vs {
			vs[i] = v
		}
		return vs
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return all(sdk.Permanent(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return all(sdk.Transient(err.Error()))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return all(sdk.Transient(fmt.Sprintf("HTTP %d", resp.StatusCode)).WithStatus(resp.StatusCode))
	}
	var answer struct {
		Results []item `json:"results"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return all(sdk.Transient("answer: " + err.Error()))
	}
	byID := make(map[int64]string, len(answer.Results))
	for _, r := range answer.Results {
		byID[r.ID] = r.Status
	}
	vs := make([]sdk.Verdict, len(ms))
	for i, m := range ms {
		switch st, ok := byID[m.ID]; {
		case !ok:
			vs[i] = sdk.Transient(fmt.Sprintf("no result for id %d", m.ID))
		case st == "ok":
			vs[i] = sdk.Success(json.RawMessage(fmt.Sprintf(`{"id":%d}`, m.ID)))
		case st == "fail":
			vs[i] = sdk.Permanent("refused")
		default:
			vs[i] = sdk.Transient("retry " + st)
		}
	}
	return vs
}

func main() { sdk.Serve(provider{}) }
