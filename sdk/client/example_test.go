package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

// Enqueue one notification and wait for its delivery; an idempotency key
// makes a retried call return the original instead of sending twice.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", "the-api-token")
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Enqueue(ctx, client.Notification{
		Channel:        "quiz",
		Recipient:      "user-42",
		Payload:        json.RawMessage(`{"text":"Today's quiz is ready"}`),
		IdempotencyKey: "quiz-2026-11-24-user-42",
	})
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.Code == client.CodeInvalid:
		log.Fatalf("notifyd refused the notification: %s", apiErr.Message) // names the field at fault
	case err != nil:
		log.Fatal(err)
	}
	for {
		n, err := c.Notification(ctx, res.ID)
		if err != nil {
			log.Fatal(err)
		}
		if n.Status == client.StatusSent || n.Status == client.StatusFailed {
			fmt.Println(n.Status, n.LastError)
			return
		}
		time.Sleep(time.Second)
	}
}

// Replay yesterday's dead letters of one channel.
func ExampleClient_ReplayDLQ() {
	c, err := client.New("http://127.0.0.1:8080", "the-api-token")
	if err != nil {
		log.Fatal(err)
	}
	r, err := c.ReplayDLQ(context.Background(), client.DLQSelector{Channel: "quiz"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed", r.Replayed)
}
