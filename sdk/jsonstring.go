package sdk

import "github.com/notifyd/notifyd/sdk/wire"

// AppendJSONString appends s as a JSON string, escaped the way encoding/json
// escapes it (minus HTML escaping); see wire.AppendJSONString, where it
// lives so that the daemon's renderer uses it without the plugin SDK.
func AppendJSONString(dst []byte, s string) []byte { return wire.AppendJSONString(dst, s) }
