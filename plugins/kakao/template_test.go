package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestFieldTemplate_Render(t *testing.T) {
	t.Parallel()
	tmpl, err := parseFieldTemplate(json.RawMessage(`{
		"object_type": "feed",
		"content": {"title": "{{.title}}", "description": "{{if .urgent}}URGENT: {{end}}{{.body}}",
			"image_width": 640, "link": {"web_url": "https://ex.example/{{.id}}"}},
		"item_content": {"items": [{"item": "price", "item_op": "{{.price}} won"}]},
		"social": null,
		"buttons": [{"title": "Open", "link": {"mobile_web_url": "https://ex.example/{{.id}}"}}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.render(mustPayload(t, `{"title":"Hi \"there\"\n","body":"<b>&</b>","urgent":true,"id":"a/b","price":12000}`))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "rendered", string(got), `{
		"object_type": "feed",
		"content": {"title": "Hi \"there\"\n", "description": "URGENT: <b>&</b>", "image_width": 640,
			"link": {"web_url": "https://ex.example/a/b"}},
		"item_content": {"items": [{"item": "price", "item_op": "12000 won"}]},
		"social": null,
		"buttons": [{"title": "Open", "link": {"mobile_web_url": "https://ex.example/a/b"}}]
	}`)
	if strings.Contains(string(got), `\u003c`) {
		t.Errorf("rendered %s escapes HTML; Kakao gets JSON, keep it readable", got)
	}

	t.Run("missing key", func(t *testing.T) {
		_, err := tmpl.render(mustPayload(t, `{"title":"x","id":"1","price":1}`))
		if err == nil || !strings.Contains(err.Error(), "template.content.description") || !strings.Contains(err.Error(), `"urgent"`) {
			t.Errorf("error = %v, want it to name template.content.description and urgent", err)
		}
	})
	t.Run("null payload", func(t *testing.T) {
		if _, err := tmpl.render(mustPayload(t, `null`)); err == nil {
			t.Error("rendering with a null payload succeeded")
		}
	})
}

func TestTemplateObject_Payload(t *testing.T) {
	t.Parallel()
	got, err := templateObject(nil, json.RawMessage(" {\n \"object_type\": \"text\", \"text\": \"hi\" }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"object_type":"text","text":"hi"}`; string(got) != want {
		t.Errorf("template_object = %s, want %s", got, want)
	}
}

func mustPayload(t *testing.T, s string) any {
	t.Helper()
	v, err := decodePayload(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
