package main

import "net/url"

// redactURL hides a password in a connection URL before it reaches a log or
// an error message.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
