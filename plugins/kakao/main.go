// Command notifyd-plugin-kakao is notifyd's KakaoTalk message provider: it
// sends each notification through Kakao's "send to me" (memo) or "send to
// friends" default-template API, classifies Kakao's JSON error codes into
// retryable and final verdicts, and refreshes the OAuth access token when
// Kakao rejects it. See README.md for the channel config.
package main

import "github.com/notifyd/notifyd/sdk"

func main() { sdk.Serve(&provider{}) }
