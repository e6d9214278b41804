package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

// BenchmarkSender_Send is one send through the plugin's sender against the
// loopback fake: template_object building, the form, the HTTP round trip and
// the verdict. The fake is in the same process, so this measures the
// plugin's overhead, not Kakao's latency.
func BenchmarkSender_Send(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  map[string]any
		msg  string
	}{
		{"memo/payload", map[string]any{}, textPayload},
		{"friends/template", map[string]any{"mode": "friends", "template": map[string]any{
			"object_type": "text", "text": "Order {{.order_id}} shipped to {{.city}}",
			"link": map[string]any{"web_url": "https://shop.example/o/{{.order_id}}"}}}, `{"order_id":1042,"city":"Seoul"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bd := setup(b, bc.cfg)
			msg := sdk.Message{ID: 1, Channel: "test", Recipient: testUUID, Payload: json.RawMessage(bc.msg), Attempt: 1}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if v := bd.sender.Send(context.Background(), msg); v.Outcome != sdk.OutcomeSuccess {
						b.Errorf("send: %s %s", v.Outcome, v.Detail)
						return
					}
				}
			})
		})
	}
}

// BenchmarkFieldTemplate_Render is the CPU cost of rendering a channel
// template with a payload.
func BenchmarkFieldTemplate_Render(b *testing.B) {
	tmpl, err := parseFieldTemplate(json.RawMessage(`{"object_type":"feed","content":{"title":"{{.title}}",
		"description":"{{.body}}","link":{"web_url":"https://ex.example/{{.id}}"}},
		"buttons":[{"title":"Open","link":{"web_url":"https://ex.example/{{.id}}"}}]}`))
	if err != nil {
		b.Fatal(err)
	}
	payload := json.RawMessage(`{"title":"Daily quiz","body":"Which planet is largest?","id":"q-20250310"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := templateObject(tmpl, payload); err != nil {
			b.Fatal(err)
		}
	}
}
