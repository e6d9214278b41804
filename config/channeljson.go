package config

import (
	"encoding/json"
	"fmt"
)

// ConfigJSON is the channel's `config:` block as the JSON its plugin
// receives in Configure.
func (c Channel) ConfigJSON() (json.RawMessage, error) {
	b, err := json.Marshal(jsonable(c.Config))
	if err != nil {
		return nil, fmt.Errorf("encode channel config: %w", err)
	}
	return b, nil
}

// jsonable makes YAML-decoded values JSON-encodable (map[any]any →
// map[string]any, recursively).
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = jsonable(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[fmt.Sprint(k)] = jsonable(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jsonable(x)
		}
		return out
	}
	return v
}
