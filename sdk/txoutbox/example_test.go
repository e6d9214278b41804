package txoutbox_test

import (
	"context"
	"encoding/json"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/sdk/txoutbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Write an order and its notification in one transaction: if the order
// rolls back, nobody is told about it.
func ExampleEnqueueTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/notifyd")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO shop_orders (id, item) VALUES ($1, $2)`, 7, "book"); err != nil {
			return err
		}
		_, err := txoutbox.EnqueueTx(ctx, tx, wire.Notification{
			Channel:        "orders",
			Recipient:      "user-7",
			Payload:        json.RawMessage(`{"text":"Your order is placed"}`),
			IdempotencyKey: "order-7-placed",
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
