package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk/wire"
)

// Invalid UTF-8 inside attributes must be refused: json.Marshal would turn
// it into U+FFFD, so "\xff" and "\xfe" would be stored as the same value.
func TestCheckSubscriber(t *testing.T) {
	t.Parallel()
	ok := wire.Subscriber{ExternalID: "u1", Addresses: map[string]string{"orders": "a"},
		Attributes: map[string]any{"name": "é", "l": []any{"x", map[string]any{"k": "v"}}}}
	if err := CheckSubscriber(ok); err != nil {
		t.Fatalf("CheckSubscriber(valid) = %v, want nil", err)
	}
	for name, tc := range map[string]struct {
		attrs map[string]any
		want  string
	}{
		"invalid UTF-8 value":        {map[string]any{"name": "a\xffb"}, "attributes.name is not valid UTF-8"},
		"invalid UTF-8 key":          {map[string]any{"n\xfe": "v"}, "is not valid UTF-8"},
		"NUL in a nested list value": {map[string]any{"l": []any{"ok", "a\x00b"}}, "attributes.l[1] contains a NUL byte"},
		"NUL in a nested key":        {map[string]any{"m": map[string]any{"k\x00": 1}}, "under attributes.m contains a NUL byte"},
	} {
		t.Run(name, func(t *testing.T) {
			s := ok
			s.Attributes = tc.attrs
			err := CheckSubscriber(s)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckSubscriber = %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}
