package notifyd

import "github.com/notifyd/notifyd/internal/service"

// The operations take and return the sdk/wire types (the API's JSON types);
// the few the dashboard needs beyond them are named here, with the
// operations' error.

// Overview is every channel at a glance (Daemon.Overview): its counts by
// status, queue sizes, state and plugin, with what could not be read.
type Overview = service.Overview

// Rate is one sample of a channel's throughput (Daemon.Rates).
type Rate = service.Rate

// PluginHealth is the health of one running channel's plugin
// (Daemon.Plugins).
type PluginHealth = service.PluginHealth

// Error is an operation refused for a reason the caller can fix (or, for
// KindUnavailable, wait out): errors.As(err, &e) and read e.Kind. Any other
// error is Postgres or Redis failing.
type Error = service.Error

// ErrorKind says why an operation was refused.
type ErrorKind = service.Kind

// The kinds of Error.
const (
	KindInvalid     = service.Invalid     // the request names something that cannot be acted on as asked
	KindNotFound    = service.NotFound    // the thing named does not exist
	KindConflict    = service.Conflict    // it exists, but its state forbids the action
	KindUnreadable  = service.Unreadable  // what the caller sent cannot be read
	KindUnsupported = service.Unsupported // the operation is not offered here
	KindUnavailable = service.Unavailable // not now; a retry may succeed
)
