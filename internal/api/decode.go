package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk/txoutbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// The request decoders are pure functions of the body (and the config they
// check it against), so the fuzz targets in fuzz_test.go drive them
// directly. Each returns a *Error: 413 for a body over http.max_body_bytes,
// 400 when the body cannot be read as the request's shape, 422 when it can
// but a value is unacceptable; the message names the field.

// decodeJSON reads one JSON object from r into v: unknown fields, trailing
// data, a key given twice in any object (wire.RepeatedKey), more values than
// checkBodyValues allows and a top level other than an object are refused. useNumber keeps
// numbers in free-form maps (attributes, payload templates) exact.
func decodeJSON(r io.Reader, v any, useNumber bool) *Error {
	b, err := io.ReadAll(r)
	if err != nil {
		return jsonError(err)
	}
	if e := checkBodyText(b); e != nil {
		return e
	}
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		return badRequest("request body is empty; want a JSON object")
	}
	if trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return jsonError(json.Unmarshal(trimmed, new(any)))
		}
		return badRequest("request body is %s; want a JSON object", jsonKind(trimmed[0]))
	}
	if e := checkBodyValues(b, reflect.TypeOf(v)); e != nil {
		return e
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if useNumber {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("request body has data after its JSON object")
	}
	if k := wire.RepeatedKey(b, reflect.TypeOf(v), ""); k != nil {
		if k.Path == "" {
			k.Path = "the request body"
		}
		return badRequest("%s", k.Error())
	}
	if p := nulField(reflect.ValueOf(v), ""); p != "" {
		return invalid("%s contains a NUL character, which notifyd cannot store", p)
	}
	return nil
}

func jsonError(err error) *Error {
	var (
		tooBig *http.MaxBytesError
		syn    *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return errorf(http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge,
			"request body is over the %d-byte limit (http.max_body_bytes)", tooBig.Limit)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("request body ends in the middle of its JSON")
	case errors.As(err, &syn):
		return badRequest("request body is not valid JSON (at byte %d): %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		// The embedded single-notification fields are reported under the
		// Go type's name; the user knows them by their own.
		field := strings.TrimPrefix(typ.Field, "enqueueItem.")
		if field == "" {
			field = "request body"
		}
		return badRequest("%s: want %s, got JSON %s", field, goKind(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("request body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// goKind names a Go type the way a JSON user thinks of it.
func goKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// enqueueItem is one notification as the API reads it. send_at is text so
// that a bad time is a 422 naming the field, not a JSON type error.
type enqueueItem struct {
	Channel        string          `json:"channel"`
	Recipient      string          `json:"recipient"`
	Payload        json.RawMessage `json:"payload"`
	IdempotencyKey string          `json:"idempotency_key"`
	SendAt         string          `json:"send_at"`
}

// enqueueBody is either one notification or {"notifications": [...]}.
type enqueueBody struct {
	enqueueItem
	Notifications []enqueueItem `json:"notifications"`
}

// enqueueRules are what an enqueue is checked against.
type enqueueRules struct {
	maxPayload int64
	configured func(channel string) bool
}

// decodeEnqueue reads POST /v1/notifications. batch says the body was
// {"notifications": [...]}.
func decodeEnqueue(r io.Reader, rules enqueueRules) (ns []wire.Notification, batch bool, e *Error) {
	var body enqueueBody
	if e := decodeJSON(r, &body, false); e != nil {
		return nil, false, e
	}
	items := []enqueueItem{body.enqueueItem}
	if body.Notifications != nil {
		single := body.enqueueItem
		if single.Channel != "" || single.Recipient != "" || single.Payload != nil || single.IdempotencyKey != "" || single.SendAt != "" {
			return nil, true, badRequest(`give either one notification or "notifications", not both`)
		}
		batch, items = true, body.Notifications
		switch {
		case len(items) == 0:
			return nil, true, invalid("notifications: empty; want 1 to %d", wire.MaxBatch)
		case len(items) > wire.MaxBatch:
			return nil, true, invalid("notifications: %d in one request, at most %d", len(items), wire.MaxBatch)
		}
	}
	ns = make([]wire.Notification, len(items))
	for i, it := range items {
		at := func(field string) string {
			if batch {
				return fmt.Sprintf("notifications[%d].%s", i, field)
			}
			return field
		}
		n, e := it.check(at, rules)
		if e != nil {
			return nil, batch, e
		}
		ns[i] = n
	}
	return ns, batch, nil
}

func (it enqueueItem) check(at func(string) string, rules enqueueRules) (wire.Notification, *Error) {
	var n wire.Notification
	payload := bytes.TrimSpace(it.Payload)
	switch {
	case it.Channel == "":
		return n, invalid("%s is required", at("channel"))
	case !rules.configured(it.Channel):
		return n, invalid("%s: %q is not a configured channel", at("channel"), it.Channel)
	case it.Recipient == "":
		return n, invalid("%s is required", at("recipient"))
	case len(payload) == 0 || bytes.Equal(payload, []byte("null")):
		return n, invalid("%s is required: the channel's message as JSON ({} for none)", at("payload"))
	}
	// Held as it will read back, too: 1e99 is 4 bytes here and 100 once
	// Postgres has it (wire.CheckPayload).
	if err := wire.CheckPayload(payload, int(min(rules.maxPayload, wire.MaxPayloadBytes))); err != nil {
		return n, invalid("%s %v (http.max_payload_bytes is %d)", at("payload"), err, rules.maxPayload)
	}
	var due time.Time
	if it.SendAt != "" {
		t, err := time.Parse(time.RFC3339Nano, it.SendAt)
		if err != nil {
			return n, invalid("%s: %q is not an RFC 3339 time such as 2026-01-02T08:00:00+09:00", at("send_at"), it.SendAt)
		}
		due = t
	}
	n = wire.Notification{
		Channel: it.Channel, Recipient: it.Recipient, Payload: json.RawMessage(payload),
		IdempotencyKey: it.IdempotencyKey, SendAt: due,
	}
	row := txoutbox.Row{Channel: n.Channel, Recipient: n.Recipient, Payload: n.Payload, IdempotencyKey: n.IdempotencyKey, DueAt: due}
	if err := row.Check(); err != nil {
		// Check's messages start with the field's name.
		msg := err.Error()
		field, rest, _ := strings.Cut(msg, " ")
		return n, invalid("%s %s", at(field), rest)
	}
	return n, nil
}

// maxIDs bounds the ids of one DLQ request.
const maxIDs = wire.MaxBatch

// decodeSelector reads a DLQ replay or purge body: {"ids": [...]} and/or
// {"channel": "..."}. A replay takes exactly one of the two.
func decodeSelector(r io.Reader, replay bool) (wire.DLQSelector, *Error) {
	var sel wire.DLQSelector
	if e := decodeJSON(r, &sel, false); e != nil {
		return sel, e
	}
	switch {
	case sel.IDs == nil && sel.Channel == "":
		return sel, invalid(`give "ids" or "channel"`)
	case replay && sel.IDs != nil && sel.Channel != "":
		return sel, invalid(`give either "ids" or "channel", not both`)
	case sel.IDs != nil && len(sel.IDs) == 0:
		return sel, invalid("ids: empty; want 1 to %d notification ids", maxIDs)
	case len(sel.IDs) > maxIDs:
		return sel, invalid("ids: %d in one request, at most %d", len(sel.IDs), maxIDs)
	case len(sel.Channel) > wire.MaxChannelLen:
		return sel, invalid("channel: %d bytes long, at most %d", len(sel.Channel), wire.MaxChannelLen)
	}
	seen := make(map[int64]bool, len(sel.IDs))
	ids := make([]int64, 0, len(sel.IDs))
	for i, id := range sel.IDs {
		if id <= 0 {
			return sel, invalid("ids[%d]: %d is not a notification id", i, id)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if sel.IDs != nil {
		sel.IDs = ids
	}
	return sel, nil
}

// subscriberBody is the PUT /v1/subscribers/{id} body; the id is the path's.
type subscriberBody struct {
	ExternalID string            `json:"external_id"`
	Addresses  map[string]string `json:"addresses"`
	Attributes map[string]any    `json:"attributes"`
	Topics     []string          `json:"topics"`
}

// decodeSubscriber reads a subscriber for id (the path's). Field rules
// (address channels, topic names) are the schedule package's; it answers
// them with ErrInvalid, which the handler turns into 422.
func decodeSubscriber(r io.Reader, id string) (wire.Subscriber, *Error) {
	var b subscriberBody
	if e := decodeJSON(r, &b, true); e != nil {
		return wire.Subscriber{}, e
	}
	if b.ExternalID != "" && b.ExternalID != id {
		return wire.Subscriber{}, invalid("external_id: %q differs from the path's %q (leave it out)", b.ExternalID, id)
	}
	// The id's length is the service's to check (service.PutSubscriber).
	return wire.Subscriber{ExternalID: id, Addresses: b.Addresses, Attributes: b.Attributes, Topics: b.Topics}, nil
}

// campaignBody is the POST /v1/campaigns body.
type campaignBody struct {
	Channel    string         `json:"channel"`
	Audience   wire.Audience  `json:"audience"`
	Payload    map[string]any `json:"payload"`
	ContentKey string         `json:"content_key"`
}

// decodeCampaign reads a campaign. Its audience must be a topic: a query
// audience is SQL, which only the operator's config may contain.
func decodeCampaign(r io.Reader) (wire.Campaign, *Error) {
	var b campaignBody
	if e := decodeJSON(r, &b, true); e != nil {
		return wire.Campaign{}, e
	}
	switch {
	case b.Channel == "":
		return wire.Campaign{}, invalid("channel is required")
	case b.Audience.Query != "" || b.Audience.Key != "":
		return wire.Campaign{}, invalid("audience.query: not accepted over the API (it is SQL); use audience.topic, or configure a schedule with a query audience")
	case b.Audience.Topic == "":
		return wire.Campaign{}, invalid("audience.topic is required")
	case b.Payload == nil:
		return wire.Campaign{}, invalid("payload is required: the message template as a JSON object")
	}
	c := wire.Campaign{Channel: b.Channel, Payload: b.Payload, ContentKey: b.ContentKey}
	c.Audience.Topic = b.Audience.Topic
	return c, nil
}

// decodeRun reads the optional body of a schedule run request: empty is a
// run firing now. The fire time is the service's to read
// (service.RunSchedule).
func decodeRun(r io.Reader) (wire.RunRequest, *Error) {
	var req wire.RunRequest
	b, err := io.ReadAll(r)
	if err != nil {
		return req, jsonError(err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return req, nil
	}
	if e := decodeJSON(bytes.NewReader(b), &req, false); e != nil {
		return req, e
	}
	return req, nil
}

// parseID reads a positive integer id from a path parameter.
func parseID(r *http.Request, what string) (int64, *Error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("path: %q is not a %s id (want a positive integer)", s, what)
	}
	return id, nil
}

// queryInt reads an optional integer query parameter in [lo, hi].
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, *Error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("query parameter %s: %q is not an integer from %d to %d", name, s, lo, hi)
	}
	return n, nil
}
