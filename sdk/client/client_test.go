package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/core/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, want string
	}{
		{"", "empty"},
		{"ftp://x:1", "scheme"},
		{"http://", "no host"},
		{"http://bad host/", "address"},
	} {
		if _, err := client.New(tc.addr, "t"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, want an error mentioning %q", tc.addr, err, tc.want)
		}
	}
	for _, ok := range []string{"127.0.0.1:8080", "http://127.0.0.1:8080/", "https://notifyd.example/base"} {
		if _, err := client.New(ok, "t"); err != nil {
			t.Errorf("New(%q) = %v", ok, err)
		}
	}
}

// TestClient_Errors: the client turns every non-2xx answer into an *Error,
// from the API's JSON body when there is one, and sends the token.
func TestClient_Errors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		switch r.URL.Path {
		case "/v1/notifications/1":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"notification 1 does not exist"}}`))
		case "/v1/subscribers/a b/c":
			if r.URL.RawPath != "/v1/subscribers/a%20b%2Fc" {
				t.Errorf("raw path %q, want the id escaped once", r.URL.RawPath)
			}
			w.WriteHeader(204)
		default:
			w.WriteHeader(502)
			_, _ = w.Write([]byte("bad gateway from a proxy"))
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "secret-token")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)

	_, err = c.Notification(ctx, 1)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != client.CodeNotFound || e.Message != "notification 1 does not exist" {
		t.Errorf("404 answer = %#v", err)
	}
	_, err = c.Channels(ctx)
	if !errors.As(err, &e) || e.StatusCode != 502 || !strings.Contains(e.Message, "bad gateway") || client.StatusCode(err) != 502 {
		t.Errorf("502 answer = %#v", err)
	}
	if err := c.DeleteSubscriber(ctx, "a b/c"); err != nil {
		t.Errorf("DeleteSubscriber with an id to escape: %v", err)
	}
	if client.StatusCode(errors.New("x")) != 0 {
		t.Error("StatusCode of a plain error is not 0")
	}
}

func TestDuration_JSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(client.Duration(90 * time.Second))
	if err != nil || string(b) != `"1m30s"` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	var d client.Duration
	if err := json.Unmarshal([]byte(`"10m"`), &d); err != nil || time.Duration(d) != 10*time.Minute {
		t.Errorf("Unmarshal = %v, %v", time.Duration(d), err)
	}
	if err := json.Unmarshal([]byte(`600`), &d); err == nil {
		t.Error("a number was accepted as a duration")
	}
}

// txBundle is a schema with an application table beside notifyd's.
type txBundle struct {
	ctx   context.Context
	db    *testenv.DB
	store *outbox.Store
}

func setupTx(t *testing.T) *txBundle {
	t.Helper()
	db := testenv.NewDB(t)
	ctx := testenv.Context(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE shop_orders (id bigint PRIMARY KEY, item text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &txBundle{ctx: ctx, db: db, store: testenv.Store(t, db.Pool)}
}

func (b *txBundle) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	shipped := client.Notification{Channel: "orders", Recipient: "user-7", Payload: json.RawMessage(`{"text":"shipped"}`), IdempotencyKey: "order-1"}

	t.Run("a rolled-back transaction leaves no notification", func(t *testing.T) {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(b.ctx, `INSERT INTO shop_orders VALUES (1, 'book')`); err != nil {
			t.Fatal(err)
		}
		res, err := client.EnqueueTx(b.ctx, tx, shipped)
		if err != nil || res.ID <= 0 || res.Status != client.StatusPending {
			t.Fatalf("EnqueueTx = %+v, %v", res, err)
		}
		// Inside the transaction the row is there; outside, not yet.
		if n := b.count(t, `SELECT count(*) FROM notifications`); n != 0 {
			t.Errorf("%d notifications visible before commit, want 0", n)
		}
		if err := tx.Rollback(b.ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.count(t, `SELECT count(*) FROM notifications`); n != 0 {
			t.Errorf("%d notifications after rollback, want 0", n)
		}
		if n := b.count(t, `SELECT count(*) FROM shop_orders`); n != 0 {
			t.Errorf("%d orders after rollback, want 0", n)
		}
		if _, err := b.store.Get(b.ctx, res.ID); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("Get(%d) after rollback = %v, want not found", res.ID, err)
		}
	})

	var committed int64
	t.Run("a committed transaction leaves exactly one PENDING notification", func(t *testing.T) {
		at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		err := pgx.BeginFunc(b.ctx, b.db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(b.ctx, `INSERT INTO shop_orders VALUES (1, 'book')`); err != nil {
				return err
			}
			later := client.Notification{Channel: "orders", Recipient: "user-7", Payload: json.RawMessage(`{"text":"review it"}`), SendAt: at}
			res, err := client.EnqueueBatchTx(b.ctx, tx, []client.Notification{shipped, later})
			if err != nil {
				return err
			}
			committed = res[0].ID
			if res[0].Duplicate || res[1].Duplicate || res[0].ID == res[1].ID {
				t.Errorf("EnqueueBatchTx = %+v, want two new notifications", res)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := b.store.Get(b.ctx, committed)
		if err != nil || n.Status != outbox.StatusPending || n.IdempotencyKey != "order-1" || n.Recipient != "user-7" {
			t.Errorf("committed notification %+v, %v", n, err)
		}
		if got := b.count(t, `SELECT count(*) FROM notifications WHERE due_at > now() + interval '59 minutes'`); got != 1 {
			t.Errorf("%d notifications due in an hour, want the SendAt one", got)
		}
	})

	t.Run("the same idempotency key in a later transaction is the original", func(t *testing.T) {
		err := pgx.BeginFunc(b.ctx, b.db.Pool, func(tx pgx.Tx) error {
			res, err := client.EnqueueTx(b.ctx, tx, shipped)
			if err == nil && (!res.Duplicate || res.ID != committed) {
				t.Errorf("repeat = %+v, want duplicate of %d", res, committed)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("bad input fails inside the transaction, naming the field", func(t *testing.T) {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(b.ctx)
		for _, tc := range []struct {
			n    client.Notification
			want string
		}{
			{client.Notification{Channel: "no spaces", Recipient: "r", Payload: json.RawMessage(`{}`)}, "channel"},
			{client.Notification{Channel: "orders", Payload: json.RawMessage(`{}`)}, "recipient"},
			{client.Notification{Channel: "orders", Recipient: "r", Payload: json.RawMessage(`{`)}, "payload"},
		} {
			if _, err := client.EnqueueTx(b.ctx, tx, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("EnqueueTx(%+v) = %v, want an error naming %s", tc.n, err, tc.want)
			}
		}
		if _, err := client.EnqueueTx(b.ctx, nil, shipped); err == nil {
			t.Error("EnqueueTx with a nil tx succeeded")
		}
		if res, err := client.EnqueueBatchTx(b.ctx, tx, nil); err != nil || res != nil {
			t.Errorf("EnqueueBatchTx(nil) = %v, %v", res, err)
		}
	})
}
