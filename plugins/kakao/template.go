package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/template"
)

// A message's template_object comes from one of two places:
//
//   - no `template` in the channel config: the notification's payload IS the
//     Kakao template object ({"object_type": "text", "text": …, "link": …}),
//     sent as is;
//   - a `template` in the channel config: that JSON object is the template
//     object, and each of its string values may hold Go text/template actions
//     ({{.order_id}}) rendered with the payload as dot. Only string values are
//     templated, and the result is re-encoded as JSON, so payload text can never
//     break the JSON around it.

// templateObject builds the template_object for one payload.
func templateObject(t *fieldTemplate, payload json.RawMessage) (json.RawMessage, error) {
	if t != nil {
		data, err := decodePayload(payload)
		if err != nil {
			return nil, err
		}
		return t.render(data)
	}
	return payloadTemplateObject(payload)
}

// payloadTemplateObject checks that the payload is a template object: a JSON
// object with a non-empty string object_type. Kakao checks the rest.
func payloadTemplateObject(payload json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("payload is not a Kakao template object (a JSON object with object_type) and the channel has no template")
	}
	var objectType string
	if err := json.Unmarshal(obj["object_type"], &objectType); err != nil || objectType == "" {
		return nil, fmt.Errorf("payload has no object_type (text, feed, list, location, commerce or calendar) and the channel has no template")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, payload); err != nil {
		return nil, fmt.Errorf("compact payload: %w", err)
	}
	return buf.Bytes(), nil
}

// decodePayload turns the payload into template data; numbers stay exact.
func decodePayload(payload json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("payload is not valid JSON: %w", err)
	}
	return data, nil
}

// fieldTemplate is a template object whose string values may be templates.
type fieldTemplate struct {
	root *tnode
}

// tnode is one JSON value of the template. Exactly one of the fields is set,
// except for a literal null (all unset, literal true).
type tnode struct {
	path    string
	tmpl    *template.Template // a string with actions
	literal any                // any value without actions
	keys    []string           // object keys, sorted
	fields  map[string]*tnode
	items   []*tnode // array
	isObj   bool
	isArr   bool
}

// parseFieldTemplate compiles the channel's `template` key.
func parseFieldTemplate(raw json.RawMessage) (*fieldTemplate, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ConfigError{Key: "template", Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &ConfigError{Key: "template", Reason: "must be a Kakao template object (a map with object_type), not a " + jsonType(v)}
	}
	if ot, ok := obj["object_type"].(string); !ok || ot == "" {
		return nil, &ConfigError{Key: "template.object_type", Reason: "required: text, feed, list, location, commerce or calendar"}
	}
	root, err := compileNode("template", v)
	if err != nil {
		return nil, err
	}
	return &fieldTemplate{root: root}, nil
}

// parseObjectTemplate compiles an AlimTalk channel's `template` key: any
// JSON object ({"content": "{{.name}}님, 오늘의 퀴즈…", "template_code": …}).
func parseObjectTemplate(raw json.RawMessage) (*fieldTemplate, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ConfigError{Key: "template", Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &ConfigError{Key: "template", Reason: "must be an AlimTalk message object ({template_code, content, …}), not a " + jsonType(v)}
	}
	root, err := compileNode("template", v)
	if err != nil {
		return nil, err
	}
	return &fieldTemplate{root: root}, nil
}

func compileNode(path string, v any) (*tnode, error) {
	n := &tnode{path: path}
	switch v := v.(type) {
	case map[string]any:
		n.isObj = true
		n.fields = make(map[string]*tnode, len(v))
		for k, child := range v {
			c, err := compileNode(path+"."+k, child)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k)
			n.fields[k] = c
		}
		sort.Strings(n.keys)
	case []any:
		n.isArr = true
		for i, child := range v {
			c, err := compileNode(fmt.Sprintf("%s[%d]", path, i), child)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, c)
		}
	case string:
		if !strings.Contains(v, "{{") {
			n.literal = v
			break
		}
		t, err := template.New(path).Option("missingkey=error").Parse(v)
		if err != nil {
			return nil, &ConfigError{Key: path, Reason: fmt.Sprintf("bad template: %v", err)}
		}
		n.tmpl = t
	default:
		n.literal = v
	}
	return n, nil
}

// render executes the template with data and encodes the template object.
func (t *fieldTemplate) render(data any) (json.RawMessage, error) {
	v, err := t.root.render(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // Kakao reads JSON, not HTML: keep "&" and "<" readable
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode template object: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func (n *tnode) render(data any) (any, error) {
	switch {
	case n.isObj:
		out := make(map[string]any, len(n.keys))
		for _, k := range n.keys {
			v, err := n.fields[k].render(data)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case n.isArr:
		out := make([]any, len(n.items))
		for i, item := range n.items {
			v, err := item.render(data)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case n.tmpl != nil:
		var sb strings.Builder
		if err := n.tmpl.Execute(&sb, data); err != nil {
			return nil, fmt.Errorf("render the channel template with the payload: %w", err)
		}
		return sb.String(), nil
	}
	return n.literal, nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "list"
	}
	return "map"
}
