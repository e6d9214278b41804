package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testdaemon"
	"github.com/notifyd/notifyd/internal/testenv"
)

// received is one webhook delivery the test's receiver saw.
type received struct{ webhookID, recipient, text string } // webhookID: the Idempotency-Key header (the notification's key)

// TestShop_PlaceOrder runs the shop against real Postgres and Redis with a
// real notifyd engine and the real webhook plugin delivering to a local
// receiver: the rolled-back order leaves no notification and nothing is
// sent for it; the committed one is delivered, once.
func TestShop_PlaceOrder(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)

	var (
		mu  sync.Mutex
		got []received
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			Recipient string `json:"recipient"`
			Payload   struct {
				Text string `json:"text"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(body, &env)
		mu.Lock()
		got = append(got, received{r.Header.Get("Idempotency-Key"), env.Recipient, env.Payload.Text})
		mu.Unlock()
	}))
	defer sink.Close()
	startNotifyd(t, db, rds, sink.URL)

	shop := Shop{DB: db.Pool, Channel: "alerts"}
	if err := shop.Setup(ctx, map[string]int{"book": 1, "unicorn": 0}); err != nil {
		t.Fatal(err)
	}

	// Out of stock: the transaction rolls back after EnqueueTx ran in it.
	if _, err := shop.PlaceOrder(ctx, Order{ID: 1, Customer: "bob", Item: "unicorn"}); !errors.Is(err, ErrOutOfStock) {
		t.Fatalf("unicorn order: %v, want ErrOutOfStock", err)
	}
	for table, want := range map[string]int{"notifications": 0, "shop_orders": 0} {
		var n int
		if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != want {
			t.Errorf("%s after the rollback: %d rows (%v), want %d", table, n, err, want)
		}
	}

	// In stock: committed, then delivered by notifyd.
	id, err := shop.PlaceOrder(ctx, Order{ID: 2, Customer: "ann", Item: "book"})
	if err != nil {
		t.Fatal(err)
	}
	store := testenv.Store(t, db.Pool)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Status == outbox.StatusSent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("notification %d is %s after 30s, want SENT (last error %q)", id, n.Status, n.LastError)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The receiver saw the committed order once and never bob's: the rolled
	// back notification was never in the outbox, so nothing could send it.
	mu.Lock()
	defer mu.Unlock()
	want := received{"order-2-placed", "ann", "Order 2: your book is on its way"}
	if len(got) != 1 || got[0] != want {
		t.Errorf("receiver got %+v, want exactly [%+v]", got, want)
	}
}

// startNotifyd runs notifyd — the whole daemon, as `notifyd serve` does —
// with channel "alerts" on the real webhook plugin, POSTing to url.
func startNotifyd(t *testing.T, db *testenv.DB, rds *testenv.Redis, url string) {
	t.Helper()
	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "webhook", "github.com/notifyd/notifyd/plugins/webhook")
	path := filepath.Join(dir, "notifyd.yaml")
	yaml := fmt.Sprintf(`
postgres: {url: %q}
http: {listen: "127.0.0.1:0"}
redis: {url: %q, prefix: %q}
plugins: {dir: %q}
channels:
  alerts: {plugin: webhook, config: {url: %q}}
`, db.URL, rds.URL, rds.Prefix, dir, url+"/hook")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, []string{})
	if err != nil {
		t.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})
	testdaemon.Start(t, context.Background(), cfg, notifyd.Options{Logger: log})
}
