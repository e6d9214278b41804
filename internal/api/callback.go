package api

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/wire"
)

// callbackDoor is one channel's callback route, built from
// channels.<c>.callback at New: the secret is kept as its SHA-256 only, so
// the comparison is constant-time whatever its length (docs/design.md §7,
// Receipts).
type callbackDoor struct {
	digest  [sha256.Size]byte
	header  string
	maxBody int64
}

func newCallbackDoors(cfg *config.Config) map[string]callbackDoor {
	doors := map[string]callbackDoor{}
	for name, ch := range cfg.Channels {
		cb := config.FillChannel(ch).Callback
		if !cb.Enabled() {
			continue
		}
		doors[name] = callbackDoor{
			digest:  sha256.Sum256([]byte(cb.Secret)),
			header:  http.CanonicalHeaderKey(cb.Header),
			maxBody: min(cb.MaxBodyBytes, cfg.HTTP.MaxBodyBytes),
		}
	}
	return doors
}

// Callback bounds past the request's own (the header block is at most
// httpguard.MaxHeaderBytes, the body the channel's max_body_bytes).
const (
	// inFlightRetryAfter is the Retry-After, in seconds, of a callback
	// naming a notification not SENT yet.
	inFlightRetryAfter = 5
)

// callback: POST /v1/channels/{name}/callback. A provider reports delivery
// of the channel's notifications; the request carries the channel's
// callback secret in its configured header instead of an operator token,
// the channel's plugin reads the body, and the receipts it names are
// recorded. 404 when the channel takes no callbacks, 401 for a wrong secret,
// 413 for a body over its bound, 400 for a body the plugin cannot read, 501
// when the plugin takes no callbacks, 503 when it cannot answer now or an
// update names a notification not SENT yet (the provider calls again, and
// what was recorded the first time is not recorded twice).
func (s *Server) callback(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	door, ok := s.callbacks[name]
	if !ok {
		// The same answer for a channel that does not exist: this route is
		// open to the internet, and says nothing of the config.
		return notFound("channel %s takes no callbacks (channels.%s.callback.secret is not set)", name, name)
	}
	if e := s.checkCallbackSecret(w, r, name, door); e != nil {
		return e
	}
	if err := httpguard.Serving(r.Context()); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, door.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errorf(http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge,
			"callback body over %d bytes (channels.%s.callback.max_body_bytes)", door.maxBody, name)
	}
	if err != nil {
		return badRequest("read callback body: %v", err)
	}
	req := sdk.CallbackRequest{Headers: r.Header.Clone(), Query: r.URL.Query(), Body: body}
	req.Headers.Del(door.header) // the secret stays here
	ans, res, err := s.ops.Callback(r.Context(), name, req)
	var se *service.Error
	if errors.As(err, &se) && se.Kind == service.Unavailable {
		// Not running here, restarting, too slow: the provider calls again.
		w.Header().Set("Retry-After", strconv.Itoa(inFlightRetryAfter))
	}
	if err != nil {
		return err
	}
	s.log.Debug("callback", "channel", name, "applied", res.Applied, "ignored", res.Ignored)
	for _, u := range res.Updates {
		if u.Reason == wire.ReceiptIgnoredInFlight {
			w.Header().Set("Retry-After", strconv.Itoa(inFlightRetryAfter))
			return unavailable("channel %s: %d of %d updates recorded; notification %d is not SENT yet: call again (what was recorded is not recorded twice)",
				name, res.Applied, len(res.Updates), u.ID)
		}
	}
	if ans.ReplyStatus != 0 {
		w.Header().Set("Content-Type", cmp.Or(ans.ReplyContentType, "text/plain; charset=utf-8"))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(ans.ReplyStatus)
		_, _ = w.Write(ans.ReplyBody)
		return nil
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// checkCallbackSecret compares the header's value with the channel's secret
// by digest, in constant time. Failures count against the client in the
// same throttle as bad bearer tokens, so the secret cannot be guessed
// faster than a token.
func (s *Server) checkCallbackSecret(w http.ResponseWriter, r *http.Request, name string, door callbackDoor) *Error {
	presented := r.Header.Get(door.header)
	d := sha256.Sum256([]byte(presented))
	if presented != "" && subtle.ConstantTimeCompare(d[:], door.digest[:]) == 1 {
		return nil
	}
	if presented != "" {
		who := s.proxies.ClientIP(r)
		if wait := s.throttle.Blocked(who); wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			return errorf(http.StatusTooManyRequests, wire.CodeTooManyRequests,
				"too many requests with a bad secret from %s; retry in %s", who, wait.Round(time.Second))
		}
		s.throttle.Fail(who)
		return errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "the %s header is not channel %s's callback secret", door.header, name)
	}
	return errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "missing %s header: a callback of channel %s carries the channel's callback secret in it", door.header, name)
}
