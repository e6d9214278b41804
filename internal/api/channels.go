package api

import (
	"bytes"
	"io"
	"net/http"

	"github.com/notifyd/notifyd/sdk/wire"
)

// listChannels: GET /v1/channels. Every configured channel, plus any channel
// that only has rows left in the outbox (service.Overview); the counts are
// at most http's counts TTL old. The overview says what it could not read;
// wire.Channels has no place for that, so a part that could not be read is
// this route's error (an outage of Postgres or Redis: 503 with
// Retry-After), never a silent zero.
func (s *Server) listChannels(w http.ResponseWriter, r *http.Request) error {
	ov, err := s.ops.Overview(r.Context(), s.countsTTL)
	if err != nil {
		return err
	}
	if err := ov.Err(); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Channels{Channels: ov.Channels, CountsAt: ov.CountsAt, OmittedChannels: ov.OmittedChannels})
	return nil
}

// pauseChannel stops every instance sending on a channel; its messages wait
// in the queue. The pause is kept in Postgres, so it survives a Redis wipe.
func (s *Server) pauseChannel(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var body wire.PauseRequest
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return jsonError(err)
	}
	if len(bytes.TrimSpace(raw)) > 0 { // the body (a reason) is optional
		if e := decodeJSON(bytes.NewReader(raw), &body, false); e != nil {
			return e
		}
	}
	return s.setPaused(w, r, name, true, body.Reason)
}

// resumeChannel lets a paused channel send again.
func (s *Server) resumeChannel(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, r.PathValue("name"), false, "")
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, name string, paused bool, reason string) error {
	var err error
	if paused {
		err = s.ops.Pause(r.Context(), name, reason)
	} else {
		err = s.ops.Resume(r.Context(), name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ChannelControl{Name: name, Paused: paused})
	return nil
}
