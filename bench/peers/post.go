package peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/notifyd/notifyd/internal/bench"
)

// job is one notification as the peers' jobs carry it (River's args,
// asynq's payload): the envelope's id and recipient, and the idempotency key
// notifyd's outbox row would have.
type job struct {
	ID        int64  `json:"id"`
	Recipient string `json:"recipient"`
	Key       string `json:"key"`
}

// jobAt is the i-th notification of a burst due at T, the same for every
// system: notifyd's rows carry the same recipient and key.
func jobAt(i int, due time.Time) job {
	r := bench.Recipient(i)
	return job{ID: int64(i) + 1, Recipient: r, Key: idempotencyKey(due, r)}
}

// idempotencyKey is what a schedule run keys a notification with
// (schedule:fire-time:recipient), as internal/bench's burst does.
func idempotencyKey(due time.Time, recipient string) string {
	return "daily-quiz:" + strconv.FormatInt(due.Unix(), 10) + ":" + recipient
}

// poster POSTs envelopes to the sink over one shared keep-alive
// http.Client with an idle connection per worker, as internal/bench's raw
// baseline does, with the headers the webhook plugin sends (unsigned).
type poster struct {
	target string
	client *http.Client
}

func newPoster(sinkURL string, concurrency int) *poster {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * concurrency,
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &poster{target: sinkURL + HookPath, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

var (
	userAgent = []string{"notifyd-peers"}
	jsonType  = []string{"application/json"}
)

// post sends j's envelope once; anything but 200 is an error (the queue's
// retry takes it from there).
func (p *poster) post(ctx context.Context, j job, attempt int, created time.Time) error {
	body := bench.Envelope(j.ID, j.Recipient, created.Truncate(time.Microsecond))
	if attempt > 1 { // the envelope says which attempt, as the plugin's does
		body = bytes.Replace(body, []byte(`"attempt":1,`), []byte(`"attempt":`+strconv.Itoa(attempt)+`,`), 1)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = http.Header{
		"Content-Type": jsonType, "User-Agent": userAgent,
		"Webhook-Id": {"msg_" + strconv.FormatInt(j.ID, 10)}, "Webhook-Timestamp": {strconv.FormatInt(time.Now().Unix(), 10)},
		"Idempotency-Key": {j.Key},
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sink answered %s", resp.Status)
	}
	return nil
}

func (p *poster) close() { p.client.CloseIdleConnections() }
