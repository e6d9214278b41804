package notifyd_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/sdk"
)

// Embed the whole daemon in an application's own process, with a provider
// written in Go instead of a plugin binary: the application's code enqueues
// through the API (or txoutbox.EnqueueTx) and notifyd delivers through
// inbox, with retries, the dead-letter queue and recovery as in `notifyd
// serve`. TestStart_embedded runs this against real Postgres and Redis.
func ExampleStart() {
	cfg := config.Default() // every key's default; the same as an empty config file
	cfg.Postgres.URL = "postgres://postgres@127.0.0.1:5432/notifyd"
	cfg.Redis.URL = "redis://127.0.0.1:6379/0"
	cfg.HTTP.Tokens = []string{os.Getenv("NOTIFYD_API_TOKEN")}
	cfg.Channels = map[string]config.Channel{"inbox": {Plugin: "inbox"}} // batch size, workers, retry: defaults

	providers := providers.NewInProcess(map[string]sdk.Provider{"inbox": &inbox{got: map[string][]string{}}}, nil)
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
