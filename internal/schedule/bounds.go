package schedule

import (
	"fmt"

	"github.com/notifyd/notifyd/sdk/wire"
)

// CheckSubscriber reports why s cannot be stored (nil when it can), with
// the field named: the same check UpsertSubscribers applies, for callers
// that want to refuse a subscriber before opening a transaction.
func CheckSubscriber(s wire.Subscriber) error {
	return validateSubscriber(0, s)
}

// attributesTextProblem says where attributes (decoded JSON) hold a key or
// string that is not storable text, "" when none does. It must run on the
// values themselves: json.Marshal rewrites invalid UTF-8 to U+FFFD, so two
// different byte strings would be stored as one.
func attributesTextProblem(v any, path string) string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if reason := textProblem(k); reason != "" {
				return fmt.Sprintf("key %q under %s %s", k, path, reason)
			}
			if p := attributesTextProblem(e, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range v {
			if p := attributesTextProblem(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case string:
		if reason := textProblem(v); reason != "" {
			return fmt.Sprintf("%s %s", path, reason)
		}
	}
	return ""
}
