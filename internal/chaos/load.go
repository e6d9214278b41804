package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/internal/outbox"
)

// Notification is one notification the load generator enqueues.
type Notification struct {
	Key       string // idempotency key = the webhook-id the sink sees
	Recipient string
	Payload   json.RawMessage
}

// Enqueuer accepts batches of notifications. An error means some may not
// have been accepted; the batch is sent again, and the idempotency keys make
// that safe.
type Enqueuer interface {
	Enqueue(ctx context.Context, batch []Notification) error
	Name() string
}

// APIEnqueuer posts batches to POST /v1/notifications of a random running
// instance, as an application would.
type APIEnqueuer struct {
	Channel   string
	Token     string
	Instances func() []string // HTTP addresses of the instances running now
	Client    *http.Client
}

// Name says how notifications are enqueued.
func (e *APIEnqueuer) Name() string { return "HTTP API (POST /v1/notifications)" }

// Enqueue posts the batch to one instance.
func (e *APIEnqueuer) Enqueue(ctx context.Context, batch []Notification) error {
	addrs := e.Instances()
	if len(addrs) == 0 {
		return errors.New("no instance is running")
	}
	type item struct {
		Channel        string          `json:"channel"`
		Recipient      string          `json:"recipient"`
		Payload        json.RawMessage `json:"payload"`
		IdempotencyKey string          `json:"idempotency_key"`
	}
	items := make([]item, len(batch))
	for i, n := range batch {
		items[i] = item{e.Channel, n.Recipient, n.Payload, n.Key}
	}
	body, err := json.Marshal(map[string]any{"notifications": items})
	if err != nil {
		return err
	}
	addr := addrs[rand.N(len(addrs))]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/notifications", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err := e.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST /v1/notifications on %s: %s: %s", addr, resp.Status, msg)
	}
	return nil
}

// DBEnqueuer writes batches straight into the outbox (outbox.Insert), as an
// application using the transactional outbox does.
type DBEnqueuer struct {
	Channel string
	Pool    *pgxpool.Pool
}

// Name says how notifications are enqueued.
func (e *DBEnqueuer) Name() string { return "outbox.Insert (transactional outbox)" }

// Enqueue inserts the batch in one statement.
func (e *DBEnqueuer) Enqueue(ctx context.Context, batch []Notification) error {
	ns := make([]outbox.NewNotification, len(batch))
	for i, n := range batch {
		ns[i] = outbox.NewNotification{Channel: e.Channel, Recipient: n.Recipient, Payload: n.Payload, IdempotencyKey: n.Key}
	}
	_, err := outbox.Insert(ctx, e.Pool, ns)
	return err
}

// Load enqueues n notifications at a steady rate, a batch per tick, each
// batch retried until accepted by one of a few workers so a stalled enqueue
// (the instance it hit was just killed, Postgres is restarting) does not
// stall the rate.
type Load struct {
	Enqueuer Enqueuer
	N        int
	Rate     float64 // per second
	Make     func(i int) Notification

	accepted atomic.Int64
	retries  atomic.Int64
	mu       sync.Mutex
	lastErr  error
}

// Accepted is how many notifications were accepted so far.
func (l *Load) Accepted() int64 { return l.accepted.Load() }

// Retries is how many batch enqueues failed and were sent again, and the
// last error.
func (l *Load) Retries() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retries.Load(), l.lastErr
}

// Run enqueues everything and returns once all is accepted (or ctx ends).
func (l *Load) Run(ctx context.Context) error {
	const tick = 50 * time.Millisecond
	batches := make(chan []Notification, 64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				l.send(ctx, b)
			}
		}()
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	next := 0
	for next < l.N && ctx.Err() == nil {
		<-t.C
		due := min(l.N, int(time.Since(start).Seconds()*l.Rate))
		if due <= next {
			continue
		}
		b := make([]Notification, 0, due-next)
		for ; next < due; next++ {
			b = append(b, l.Make(next))
		}
		for len(b) > 0 {
			k := min(len(b), 500)
			select {
			case batches <- b[:k]:
			case <-ctx.Done():
			}
			b = b[k:]
		}
	}
	close(batches)
	wg.Wait()
	return ctx.Err()
}

func (l *Load) send(ctx context.Context, b []Notification) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := l.Enqueuer.Enqueue(cctx, b)
		cancel()
		if err == nil {
			l.accepted.Add(int64(len(b)))
			return
		}
		l.retries.Add(1)
		l.mu.Lock()
		l.lastErr = err
		l.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}
