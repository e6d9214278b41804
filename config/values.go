package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"

	"github.com/notifyd/notifyd/sdk"
)

// maxQuoted bounds how much of a bad value an error quotes.
const maxQuoted = 64

var durationType = reflect.TypeOf(time.Duration(0))

// checkValues reads every scalar the file or the environment gives a typed
// key as that key's type would, before the decoder does: the decoder's
// errors ("time: unknown unit", "strconv.ParseInt: invalid syntax") name
// neither the key nor the value, and these do.
func checkValues(k *koanf.Koanf) error {
	for _, key := range k.Keys() {
		t, ok := keyType(key)
		if !ok {
			continue
		}
		if reason := valueProblem(k.Get(key), t); reason != "" {
			return &Error{Key: key, Reason: reason}
		}
	}
	return nil
}

// keyType is the Go type of the field key names; false for a key inside a
// free-form map (a plugin's config, a payload) or one checkKnown refuses.
func keyType(key string) (reflect.Type, bool) {
	t := reflect.TypeOf(Config{})
	for _, part := range strings.Split(key, ".") {
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(t, part)
			if !ok {
				return nil, false
			}
			t = f.Type
		case reflect.Map:
			if t.Elem().Kind() == reflect.Interface {
				return nil, false
			}
			t = t.Elem()
		default:
			return nil, false
		}
	}
	return t, true
}

// valueProblem says what is wrong with v as a value of type t, or "" when the
// decoder can read it (a list or object where a scalar belongs is left to
// the decoder).
func valueProblem(v any, t reflect.Type) string {
	s, isString := v.(string)
	switch {
	case t == durationType:
		if !isString {
			// A bare number is nanoseconds to the decoder: `timeout: 30`
			// meant seconds and sent nothing in time.
			switch v.(type) {
			case int, int64, float64:
				if n := fmt.Sprint(v); n != "0" {
					return fmt.Sprintf("%s has no unit: write a duration with one, such as %ss or %sms (a bare number would be %s nanoseconds)", n, n, n, n)
				}
			}
			return ""
		}
		if _, err := time.ParseDuration(strings.TrimSpace(s)); err != nil {
			reason := quote(s) + " is not a duration (such as 500ms or 2s)"
			if why := durationWhy(err); why != "" {
				reason += ": " + why
			}
			return reason
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return intProblem(v, t.Bits())
	case t.Kind() == reflect.Bool:
		if isString {
			if _, err := strconv.ParseBool(strings.TrimSpace(s)); err != nil {
				return quote(s) + " is not true or false"
			}
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if isString {
			if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
				return quote(s) + " is not a number"
			}
		}
	}
	return ""
}

func intProblem(v any, bits int) string {
	switch n := v.(type) {
	case string:
		_, err := strconv.ParseInt(strings.TrimSpace(n), 0, bits)
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Sprintf("%s is out of range (at most %d)", quote(n), int64(1)<<(bits-1)-1)
		}
		if err != nil {
			if f, ferr := strconv.ParseFloat(strings.TrimSpace(n), 64); ferr == nil && f != math.Trunc(f) {
				return quote(n) + " is not a whole number"
			}
			return quote(n) + " is not an integer"
		}
	case float64:
		if n != math.Trunc(n) {
			return fmt.Sprintf("%v is not a whole number", n)
		}
		if math.Abs(n) > math.Ldexp(1, bits-1)-1 {
			return fmt.Sprintf("%v is out of range (at most %d)", n, int64(1)<<(bits-1)-1)
		}
	case int64:
		if bits < 64 && (n > int64(1)<<(bits-1)-1 || n < -(int64(1)<<(bits-1))) {
			return fmt.Sprintf("%d is out of range (at most %d)", n, int64(1)<<(bits-1)-1)
		}
	case int:
		return intProblem(int64(n), bits)
	case bool:
		return fmt.Sprintf("%v is not an integer", n)
	}
	return ""
}

// durationWhy is time.ParseDuration's reason without its "time:" prefix and
// its copy of the value (quoted once already).
func durationWhy(err error) string {
	msg := strings.TrimPrefix(err.Error(), "time: ")
	if i := strings.Index(msg, " in duration "); i >= 0 {
		msg = msg[:i]
	}
	if strings.HasPrefix(msg, "invalid duration") {
		return ""
	}
	return msg
}

// quote quotes a bad value for an error: URL credentials masked first (a
// URL under the wrong key), then at most maxQuoted bytes.
func quote(s string) string {
	s = sdk.RedactURLs(s)
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "…"
	}
	return strconv.Quote(s)
}
