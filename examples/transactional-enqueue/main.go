// Command transactional-enqueue is a tiny shop that writes an order and its
// "order placed" notification in one Postgres transaction, with
// txoutbox.EnqueueTx: the notification exists if and only if the order
// commits. An order that fails half-way (out of stock) rolls back, and
// nobody is told about an order that does not exist.
//
// It needs the notifyd database (the shop's tables live beside notifyd's)
// and, to see the notification delivered, a running notifyd with the
// channel configured, e.g. the quickstart:
//
//	go run ./examples/quickstart/sink &
//	NOTIFYD_API_TOKEN=dev-token-0123456789 bin/notifyd serve --config examples/quickstart/notifyd.yaml &
//	go run ./examples/transactional-enqueue -db "postgres://postgres@127.0.0.1:5432/notifyd?sslmode=disable"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/sdk/txoutbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Order is what the shop sells.
type Order struct {
	ID       int64
	Customer string // the recipient on the notifyd channel
	Item     string
}

// ErrOutOfStock fails an order; its transaction, notification included,
// rolls back.
var ErrOutOfStock = errors.New("out of stock")

// Shop places orders and tells customers through notifyd's channel.
type Shop struct {
	DB      *pgxpool.Pool
	Channel string
}

// Setup creates the shop's tables (beside notifyd's, in the same database)
// and stocks them.
func (s Shop) Setup(ctx context.Context, stock map[string]int) error {
	_, err := s.DB.Exec(ctx, `
CREATE TABLE IF NOT EXISTS shop_orders (id bigint PRIMARY KEY, customer text NOT NULL, item text NOT NULL);
CREATE TABLE IF NOT EXISTS shop_stock (item text PRIMARY KEY, units int NOT NULL CHECK (units >= 0))`)
	if err != nil {
		return fmt.Errorf("create shop tables: %w", err)
	}
	for item, n := range stock {
		if _, err := s.DB.Exec(ctx, `INSERT INTO shop_stock VALUES ($1, $2) ON CONFLICT (item) DO UPDATE SET units = $2`, item, n); err != nil {
			return fmt.Errorf("stock %s: %w", item, err)
		}
	}
	return nil
}

// PlaceOrder writes the order, enqueues its notification and takes the
// item from stock, all in one transaction, and returns the notification's
// id. When any step fails, none of it happened: no order, no notification.
func (s Shop) PlaceOrder(ctx context.Context, o Order) (int64, error) {
	var id int64
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO shop_orders (id, customer, item) VALUES ($1, $2, $3)`, o.ID, o.Customer, o.Item); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		payload, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("Order %d: your %s is on its way", o.ID, o.Item)})
		res, err := txoutbox.EnqueueTx(ctx, tx, wire.Notification{
			Channel:   s.Channel,
			Recipient: o.Customer,
			Payload:   payload,
			// A retried PlaceOrder cannot notify twice.
			IdempotencyKey: fmt.Sprintf("order-%d-placed", o.ID),
		})
		if err != nil {
			return err
		}
		id = res.ID
		// Taken from stock last, on purpose: when it fails, the order and
		// the notification written above roll back with it.
		tag, err := tx.Exec(ctx, `UPDATE shop_stock SET units = units - 1 WHERE item = $1 AND units > 0`, o.Item)
		if err != nil {
			return fmt.Errorf("take %s from stock: %w", o.Item, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("order %d (%s): %w", o.ID, o.Item, ErrOutOfStock)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

func main() {
	dsn := flag.String("db", os.Getenv("DATABASE_URL"), "the notifyd database (env DATABASE_URL)")
	channel := flag.String("channel", "alerts", "the notifyd channel that tells customers")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("give -db (or DATABASE_URL): the notifyd database URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	shop := Shop{DB: pool, Channel: *channel}
	if err := shop.Setup(ctx, map[string]int{"book": 100, "unicorn": 0}); err != nil {
		log.Fatal(err)
	}
	base := time.Now().UnixMilli()
	id, err := shop.PlaceOrder(ctx, Order{ID: base, Customer: "ann", Item: "book"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order %d committed; notification %d is on its way (follow it: notifyd status %d)\n", base, id, id)
	_, err = shop.PlaceOrder(ctx, Order{ID: base + 1, Customer: "bob", Item: "unicorn"})
	if !errors.Is(err, ErrOutOfStock) {
		log.Fatalf("the unicorn order: %v, want out of stock", err)
	}
	fmt.Printf("order %d rolled back (%v): no order, and no notification for bob\n", base+1, err)
}
