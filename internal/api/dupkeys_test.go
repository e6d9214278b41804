package api

import (
	"bytes"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk/wire"
)

// A key given twice anywhere in a request body is refused with 400 naming
// the key and where it is, at every door that reads JSON.
func TestDecode_RepeatedKey(t *testing.T) {
	t.Parallel()
	rules := enqueueRules{maxPayload: 1 << 10, configured: func(ch string) bool { return ch == "hook" || ch == "kakao" }}
	enqueue := func(body string) *Error { _, _, e := decodeEnqueue(strings.NewReader(body), rules); return e }
	selector := func(body string) *Error { _, e := decodeSelector(strings.NewReader(body), true); return e }
	subscriber := func(body string) *Error { _, e := decodeSubscriber(strings.NewReader(body), "u1"); return e }
	campaign := func(body string) *Error { _, e := decodeCampaign(strings.NewReader(body)); return e }
	run := func(body string) *Error { _, e := decodeRun(strings.NewReader(body)); return e }
	for _, tc := range []struct {
		name    string
		decode  func(string) *Error
		body    string
		mention []string // in the message
	}{
		{"top level", enqueue, `{"channel":"hook","channel":"kakao","recipient":"r","payload":{}}`,
			[]string{`the request body: key "channel" is given twice`}},
		{"top level, another case", enqueue, `{"channel":"hook","Channel":"kakao","recipient":"r","payload":{}}`,
			[]string{`key "Channel" repeats "channel"`}},
		{"top level, escaped", enqueue, `{"channel":"hook","\u0063hannel":"kakao","recipient":"r","payload":{}}`,
			[]string{`key "channel" is given twice`}},
		{"in a batch's notification", enqueue, `{"notifications":[{"channel":"hook","recipient":"a","payload":{}},{"channel":"hook","recipient":"b","recipient":"c","payload":{}}]}`,
			[]string{`notifications[1]: key "recipient" is given twice`}},
		{"the batch key", enqueue, `{"notifications":[{"channel":"hook","recipient":"a","payload":{}}],"notifications":[]}`,
			[]string{`key "notifications" is given twice`}},
		{"in a payload", enqueue, `{"channel":"hook","recipient":"r","payload":{"text":"a","text":"b"}}`,
			[]string{`payload: key "text" is given twice`}},
		{"deep in a batch's payload", enqueue, `{"notifications":[{"channel":"hook","recipient":"a","payload":{"m":[{"x":1},{"y":{"k":1,"k":2}}]}}]}`,
			[]string{`notifications[0].payload.m[1].y: key "k" is given twice`}},
		{"a DLQ selector", selector, `{"ids":[1],"ids":[2]}`, []string{`key "ids" is given twice`}},
		{"subscriber attributes", subscriber, `{"attributes":{"plan":"free","plan":"paid"}}`,
			[]string{`attributes: key "plan" is given twice`}},
		{"subscriber addresses", subscriber, `{"addresses":{"hook":"a","hook":"b"}}`,
			[]string{`addresses: key "hook" is given twice`}},
		{"campaign audience", campaign, `{"channel":"hook","audience":{"topic":"a","topic":"b"},"payload":{}}`,
			[]string{`audience: key "topic" is given twice`}},
		{"campaign payload", campaign, `{"channel":"hook","audience":{"topic":"a"},"payload":{"t":"{{.x}}","t":"y"}}`,
			[]string{`payload: key "t" is given twice`}},
		{"schedule run", run, `{"force":true,"force":false}`, []string{`key "force" is given twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.decode(tc.body)
			if e == nil {
				t.Fatalf("%s: accepted, want 400", tc.body)
			}
			if e.Status != 400 || e.Code != wire.CodeBadRequest {
				t.Fatalf("%s: %v, want 400 %s", tc.body, e, wire.CodeBadRequest)
			}
			for _, m := range tc.mention {
				if !strings.Contains(e.Message, m) {
					t.Errorf("message %q does not say %q", e.Message, m)
				}
			}
		})
	}
	// Keys that differ only in case are two keys in a free-form object.
	for _, ok := range []string{
		`{"channel":"hook","recipient":"r","payload":{"a":1,"A":2,"n":{"a":1},"l":[{"a":1},{"a":2}]}}`,
		`{"notifications":[{"channel":"hook","recipient":"a","payload":{}},{"channel":"hook","recipient":"b","payload":{}}]}`,
	} {
		if e := enqueue(ok); e != nil {
			t.Errorf("%s: %v, want accepted", ok, e)
		}
	}
}

// The scan is linear: a body at the limit of one wide object and one deep
// one is answered, not walked quadratically.
func TestDecode_RepeatedKeyLarge(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString(`{"attributes":{`)
	for i := range 50_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `":1`)
	}
	b.WriteString(`}}`)
	if _, e := decodeSubscriber(bytes.NewReader(b.Bytes()), "u1"); e == nil || !strings.Contains(e.Message, "is given twice") {
		t.Errorf("a wide object with repeats: %v, want 400 naming the repeat", e)
	}
	deep := `{"attributes":{"a":` + strings.Repeat(`[`, 5000) + strings.Repeat(`]`, 5000) + `}}`
	if _, e := decodeSubscriber(strings.NewReader(deep), "u1"); e != nil && strings.Contains(e.Message, "twice") {
		t.Errorf("a deep array: %v", e)
	}
}
