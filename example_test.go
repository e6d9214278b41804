package notifyd_test

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"os/signal"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/sdk"
)

// appInbox is the application's own provider, written in Go: it delivers a
// notification by storing its text in the application's in-app inbox (here,
// the log).
type appInbox struct{}

func (appInbox) Describe() sdk.Info { return sdk.Info{Name: "inbox", Version: "1"} }

func (appInbox) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(_ context.Context, m sdk.Message) sdk.Verdict {
		var p struct{ Text string }
		if err := json.Unmarshal(m.Payload, &p); err != nil || p.Text == "" {
			return sdk.Permanent("payload has no text") // dead-lettered, never retried
		}
		log.Printf("inbox of %s: %s", m.Recipient, p.Text)
		return sdk.Success(nil)
	}), nil
}

// Embed the whole daemon in an application's own process, with a provider
// written in Go instead of a plugin binary: the application's code enqueues
// through the API (sdk/client, or sdk/txoutbox's EnqueueTx) and notifyd
// delivers through appInbox, with retries, the dead-letter queue and
// recovery as in `notifyd serve`. It imports this package and the SDK only;
// README.md ("Embedding notifyd") says how to depend on both from outside.
// TestStart_embedded runs the same against real Postgres and Redis, and
// internal/sdkcheck's TestOutsideEmbedding builds and runs such a program in
// a module of its own.
func ExampleStart() {
	cfg := notifyd.DefaultConfig() // every key's default; or notifyd.LoadConfig("notifyd.yaml")
	cfg.Postgres.URL = "postgres://postgres@127.0.0.1:5432/notifyd"
	cfg.Redis.URL = "redis://127.0.0.1:6379/0"
	cfg.HTTP.Tokens = []string{os.Getenv("NOTIFYD_API_TOKEN")}
	cfg.Channels = map[string]notifyd.ChannelConfig{"inbox": {Plugin: "inbox"}} // batch size, workers, retry: defaults

	providers := notifyd.NewInProcess(map[string]sdk.Provider{"inbox": appInbox{}}, nil)
	defer providers.Close()
	d, err := notifyd.Start(context.Background(), &cfg, notifyd.Options{Providers: providers})
	if err != nil {
		log.Fatal(err) // a bad config names its key
	}
	log.Printf("notifyd API on %s", d.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
	if err := d.Stop(context.Background()); err != nil { // drains in-flight sends, then stops
		log.Print(err)
	}
}
