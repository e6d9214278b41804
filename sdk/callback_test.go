package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// receiptSender is a Sender that takes callbacks with handle.
type receiptSender struct {
	sdk.SenderFunc
	handle func(sdk.CallbackRequest) (sdk.CallbackAnswer, error)
}

func (s receiptSender) HandleCallback(_ context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	return s.handle(req)
}

func noSend(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }

// TestServer_Callback: a callback reaches the channel's CallbackHandler over
// real gRPC with its headers, query and body; what it answers comes back
// within the bounds; a Sender that takes none answers ErrCallbackUnsupported.
func TestServer_Callback(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	var got sdk.CallbackRequest
	c := serve(t, &fixture{info: sdk.Info{Name: "fx"}, configure: senderFor(receiptSender{noSend, func(req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
		got = req
		switch string(req.Body) {
		case "bad":
			return sdk.CallbackAnswer{}, errors.New("cannot read that")
		case "many":
			return sdk.CallbackAnswer{Updates: make([]sdk.ReceiptUpdate, sdk.MaxCallbackUpdates+1)}, nil
		case "panic":
			panic("boom")
		}
		long := strings.Repeat("é", sdk.MaxReceiptDetail) + "\x00"
		u := sdk.DeliveredUpdate(7, long)
		u.At = at
		return sdk.CallbackAnswer{Updates: []sdk.ReceiptUpdate{u, sdk.FailedAfterSendUpdate(8, "bounced")}}, nil
	}})})
	ctx := context.Background()

	ans, err := c.Callback(ctx, sdk.CallbackRequest{Channel: "ch", Headers: http.Header{"X-Sig": {"v"}}, Query: url.Values{"a": {"1"}}, Body: []byte("ok")})
	if err != nil {
		t.Fatalf("Callback: %v", err)
	}
	if got.Channel != "ch" || got.Headers.Get("X-Sig") != "v" || got.Query.Get("a") != "1" || string(got.Body) != "ok" {
		t.Errorf("handler got %+v; want channel ch, header X-Sig, query a=1, body ok", got)
	}
	if len(ans.Updates) != 2 || ans.Updates[0].NotificationID != 7 || ans.Updates[0].Outcome != sdk.Delivered || !ans.Updates[0].At.Equal(at) ||
		ans.Updates[1].Outcome != sdk.FailedAfterSend {
		t.Fatalf("answer %+v; want 7 DELIVERED at %s, 8 FAILED_AFTER_SEND", ans, at)
	}
	if d := ans.Updates[0].Detail; len(d) > sdk.MaxReceiptDetail || !utf8.ValidString(d) || strings.Contains(d, "\x00") || !strings.HasSuffix(d, "…") {
		t.Errorf("detail of %d bytes (valid %v); want at most %d, valid UTF-8, no NUL, marked cut", len(d), utf8.ValidString(d), sdk.MaxReceiptDetail)
	}

	var refused *providerclient.CallbackRefused
	if _, err := c.Callback(ctx, sdk.CallbackRequest{Channel: "ch", Body: []byte("bad")}); !errors.As(err, &refused) || refused.Message != "cannot read that" {
		t.Errorf("a handler error: %v; want CallbackRefused with its text", err)
	}
	for _, body := range []string{"many", "panic"} {
		if _, err := c.Callback(ctx, sdk.CallbackRequest{Channel: "ch", Body: []byte(body)}); !errors.As(err, &refused) {
			t.Errorf("%s: %v; want the callback refused", body, err)
		}
	}
	if _, err := c.Callback(ctx, sdk.CallbackRequest{Channel: "nosuch"}); err == nil || errors.Is(err, providerclient.ErrCallbackUnsupported) {
		t.Errorf("an unconfigured channel: %v; want an error other than unsupported", err)
	}

	plain := serve(t, &fixture{info: sdk.Info{Name: "plain"}, configure: senderFor(sdk.SenderFunc(noSend))})
	if _, err := plain.Callback(ctx, sdk.CallbackRequest{Channel: "ch"}); !errors.Is(err, providerclient.ErrCallbackUnsupported) {
		t.Errorf("a Sender without HandleCallback: %v; want ErrCallbackUnsupported", err)
	}
}
