package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// The fuzz targets drive the request decoders with arbitrary bodies. Their
// seeds run in every plain `go test`; `go test -fuzz=FuzzDecodeEnqueue
// ./internal/api` (one target at a time) explores further. The properties: no
// panic; an error is 400, 413 or 422 with a code and a message; a success
// is something the outbox accepts as it is, and has no key given twice in
// any object (jsontext, a decoder of its own, is the judge).

const fuzzBodyLimit = 4 << 10

// fuzzBody is the body as a handler sees it: behind http.MaxBytesReader.
func fuzzBody(data []byte) io.Reader {
	return http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(data)), fuzzBodyLimit)
}

func checkDecodeError(t *testing.T, e *Error) {
	t.Helper()
	if !slices.Contains([]int{400, 413, 422}, e.Status) {
		t.Fatalf("status %d, want 400, 413 or 422: %v", e.Status, e)
	}
	want := map[int]string{400: wire.CodeBadRequest, 413: wire.CodeBodyTooLarge, 422: wire.CodeInvalid}[e.Status]
	if e.Code != want || e.Message == "" {
		t.Fatalf("error %+v: want code %s and a message", e, want)
	}
}

// acceptedOnce fails the test when an accepted body repeats a key in some
// object, as jsontext (which refuses duplicate names) reads it.
func acceptedOnce(t *testing.T, data []byte) {
	t.Helper()
	d := jsontext.NewDecoder(bytes.NewReader(data))
	if err := d.SkipValue(); errors.Is(err, jsontext.ErrDuplicateName) {
		t.Fatalf("accepted a body with a key given twice: %v", err)
	}
}

var enqueueSeeds = []string{
	`{"channel":"orders","recipient":"u1","payload":{"text":"hi"}}`,
	`{"channel":"orders","recipient":"u1","payload":{},"idempotency_key":"k","send_at":"2026-01-02T08:00:00+09:00"}`,
	`{"notifications":[{"channel":"orders","recipient":"a","payload":1},{"channel":"alerts","recipient":"b","payload":"x","idempotency_key":"k"}]}`,
	`{"notifications":[]}`,
	`{"notifications":null}`,
	`{"channel":"orders","notifications":[]}`,
	`{"channel":"sms","recipient":"u","payload":{}}`,
	`{"channel":"orders","recipient":"a\u0000","payload":{}}`,
	`{"channel":"orders","recipient":"r","payload":{"t":"\u0000"}}`,
	`{"channel":"orders","recipient":"r","payload":{"t":"\\u0000"}}`,
	`{"channel":"orders","recipient":"r","payload":null}`,
	`{"channel":"orders","recipient":"r","payload":"` + strings.Repeat("x", 2000) + `"}`,
	`{"channel":"orders","recipient":"r","payload":{},"send_at":"soon"}`,
	`{"channel":"orders","recipient":["r"],"payload":{}}`,
	`{"notifications":[{"channel":1}]}`,
	`{"channel":"orders"} trailing`,
	`[]`, `null`, `"s"`, `12`, ``, `{`, `{"a":1}`, "\xff\xfe", `{"channel":"\xff"}`,
	`{"channel":"orders","recipient":"r","payload":"\xff"}`,
	`{"channel":"orders","recipient":"r","payload":{` + strings.Repeat(`"k":1,`, 800) + `"k":1}}`,
	// Repeated keys, at every level.
	`{"channel":"orders","channel":"alerts","recipient":"r","payload":{}}`,
	`{"channel":"orders","CHANNEL":"alerts","recipient":"r","payload":{}}`,
	`{"channel":"orders","\u0063hannel":"alerts","recipient":"r","payload":{}}`,
	`{"notifications":[{"channel":"orders","recipient":"a","recipient":"b","payload":{}}]}`,
	`{"notifications":[],"notifications":[{"channel":"orders","recipient":"a","payload":{}}]}`,
	`{"channel":"orders","recipient":"r","payload":{"t":1,"t":2}}`,
	`{"channel":"orders","recipient":"r","payload":{"a":{"b":[{"c":1,"c":1}]}}}`,
	`{"channel":"orders","recipient":"r","payload":{"a":1,"A":1,"\u0061":2}}`,
}

func FuzzDecodeEnqueue(f *testing.F) {
	for _, s := range enqueueSeeds {
		f.Add([]byte(s))
	}
	rules := enqueueRules{
		maxPayload: 1 << 10,
		configured: func(ch string) bool { return ch == "orders" || ch == "alerts" },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ns, batch, e := decodeEnqueue(fuzzBody(data), rules)
		if e != nil {
			checkDecodeError(t, e)
			if ns != nil {
				t.Fatalf("error %v with %d notifications", e, len(ns))
			}
			return
		}
		if len(ns) == 0 || len(ns) > wire.MaxBatch || (!batch && len(ns) != 1) {
			t.Fatalf("%d notifications (batch %v)", len(ns), batch)
		}
		acceptedOnce(t, data)
		for i, n := range ns {
			if !rules.configured(n.Channel) || n.Recipient == "" || int64(len(n.Payload)) > rules.maxPayload {
				t.Fatalf("notification %d passed but is not acceptable: %+v", i, n)
			}
		}
		rows := make([]outbox.NewNotification, len(ns))
		for i, n := range ns {
			rows[i] = outbox.NewNotification{Channel: n.Channel, Recipient: n.Recipient, Payload: n.Payload, IdempotencyKey: n.IdempotencyKey, DueAt: n.SendAt}
		}
		if err := outbox.Validate(rows); err != nil {
			t.Fatalf("decoded batch fails the outbox's validation: %v", err)
		}
	})
}

func FuzzDecodeSelector(f *testing.F) {
	for _, s := range []string{
		`{"ids":[1,2,3]}`, `{"ids":[1,1]}`, `{"channel":"orders"}`, `{"ids":[1],"channel":"orders"}`,
		`{}`, `{"ids":[]}`, `{"ids":[0]}`, `{"ids":[-5]}`, `{"ids":["1"]}`, `{"ids":[1.5]}`,
		`{"ids":[99999999999999999999]}`, `{"channel":` + `"` + strings.Repeat("c", 300) + `"}`, `{"id":1}`, `[1]`,
		`{"ids":[1],"ids":[2]}`, `{"channel":"orders","Channel":"alerts"}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, replay bool) {
		sel, e := decodeSelector(fuzzBody(data), replay)
		if e != nil {
			checkDecodeError(t, e)
			return
		}
		acceptedOnce(t, data)
		if len(sel.IDs) == 0 && sel.Channel == "" {
			t.Fatalf("selector %+v selects nothing", sel)
		}
		if replay && len(sel.IDs) > 0 && sel.Channel != "" {
			t.Fatalf("replay selector %+v has both", sel)
		}
		seen := map[int64]bool{}
		for _, id := range sel.IDs {
			if id <= 0 || seen[id] {
				t.Fatalf("ids %v: non-positive or repeated", sel.IDs)
			}
			seen[id] = true
		}
		if len(sel.IDs) > maxIDs {
			t.Fatalf("%d ids, at most %d", len(sel.IDs), maxIDs)
		}
	})
}

func FuzzDecodeSubscriber(f *testing.F) {
	for _, s := range []string{
		`{"addresses":{"orders":"x"},"attributes":{"n":1,"big":12345678901234567890},"topics":["news"]}`,
		`{"external_id":"u1"}`, `{"external_id":"u2"}`, `{}`, `{"addresses":[1]}`, `{"attributes":null}`,
		`{"topics":"news"}`, `{"email":"x"}`,
		`{"attributes":{"a":1,"a":2}}`, `{"addresses":{"orders":"x","orders":"y"}}`, `{"topics":[],"topics":["news"]}`,
		`{"attributes":{"n":{"x":[{"k":1,"k":2}]}}}`,
	} {
		f.Add([]byte(s), "u1")
	}
	f.Add([]byte(`{}`), strings.Repeat("x", 300))
	f.Fuzz(func(t *testing.T, data []byte, id string) {
		sub, e := decodeSubscriber(fuzzBody(data), id)
		if e != nil {
			checkDecodeError(t, e)
			return
		}
		acceptedOnce(t, data)
		if sub.ExternalID != id {
			t.Fatalf("external id %q, want the path's %q", sub.ExternalID, id)
		}
	})
}

func FuzzDecodeCampaign(f *testing.F) {
	for _, s := range []string{
		`{"channel":"orders","audience":{"topic":"news"},"payload":{"text":"hi {{.recipient}}"}}`,
		`{"channel":"orders","audience":{"query":"SELECT 1","key":"id"},"payload":{}}`,
		`{"channel":"orders","audience":{},"payload":{}}`, `{"channel":"orders","audience":{"topic":"n"}}`,
		`{"audience":{"topic":"n"},"payload":{}}`, `{"channel":"o","audience":{"topic":"n"},"payload":[1]}`,
		`{"channel":"o","audience":"n","payload":{}}`,
		`{"channel":"o","audience":{"topic":"n","topic":"m"},"payload":{}}`,
		`{"channel":"o","audience":{"topic":"n"},"payload":{"t":1,"t":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, e := decodeCampaign(fuzzBody(data))
		if e != nil {
			checkDecodeError(t, e)
			return
		}
		acceptedOnce(t, data)
		if c.Channel == "" || c.Audience.Topic == "" || c.Audience.Query != "" || c.Payload == nil {
			t.Fatalf("campaign %+v passed: want a channel, a topic, no query, a payload", c)
		}
	})
}
