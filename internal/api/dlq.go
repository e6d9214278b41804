package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/notifyd/notifyd/internal/httpguard"

	"github.com/notifyd/notifyd/sdk/wire"
)

// DLQ paging defaults.
const (
	dlqLimitDefault = 100
	dlqLimitMax     = 1000
)

// dlqList: GET /v1/dlq?channel=&limit=&after=. The dead-letter queue is read
// from Postgres, the truth; Redis' dead list is only an index of it. The
// page holds its share of the bound on answers in flight until it has
// answered (httpguard.HoldAnswer).
func (s *Server) dlqList(w http.ResponseWriter, r *http.Request) error {
	limit, e := queryInt(r, "limit", dlqLimitDefault, 1, dlqLimitMax)
	if e != nil {
		return e
	}
	after, e := queryInt(r, "after", 0, 0, 1<<62)
	if e != nil {
		return e
	}
	release, err := holdAnswer(r, httpguard.PageCharge(int(limit), httpguard.NotificationBytes))
	if err != nil {
		return err
	}
	defer release()
	page, err := s.ops.Dead(r.Context(), wire.DLQQuery{Channel: r.URL.Query().Get("channel"), After: after, Limit: int(limit)})
	if err != nil {
		return err
	}
	b, err := encodeDLQPage(page)
	if err != nil {
		return err
	}
	httpguard.Encoded(r.Context(), int64(b.Len()))
	writeEncoded(w, http.StatusOK, b)
	return nil
}

// encodeDLQPage is page as writeJSON answers it, encoded a row at a time
// and cut after the row whose encoding passes httpguard.PageBytes, with
// next_after set to it: the store cuts a page at 16 MiB as it reads it, but
// JSON writes each control character of a row's text as six bytes, so
// 1,000 dead letters of 7 KiB of such text (a recipient, a key and an
// error, as an application's SQL may write them) answered 43 MiB. An answer
// is now at most PageBytes past its first row's encoding. Each row is let
// go once it is encoded, so a page's rows and its answer are not both
// whole in memory at once.
func encodeDLQPage(page wire.DLQPage) (*bytes.Buffer, error) {
	var out, row bytes.Buffer
	enc := json.NewEncoder(&row)
	enc.SetEscapeHTML(false)
	rows, next := page.Notifications, page.NextAfter
	out.WriteString(`{"notifications":`)
	if rows == nil {
		out.WriteString("null")
	} else {
		out.WriteByte('[')
		for i := range rows {
			if i > 0 && out.Len() >= httpguard.PageBytes {
				next = rows[i-1].ID
				break
			}
			row.Reset()
			if err := enc.Encode(&rows[i]); err != nil {
				return nil, fmt.Errorf("encode dead letter %d: %w", rows[i].ID, err)
			}
			if i > 0 {
				out.WriteByte(',')
			}
			out.Write(bytes.TrimSuffix(row.Bytes(), []byte("\n")))
			rows[i] = wire.NotificationInfo{ID: rows[i].ID}
		}
		out.WriteByte(']')
	}
	out.WriteString(`,"next_after":`)
	out.WriteString(strconv.FormatInt(next, 10))
	out.WriteString("}\n")
	return &out, nil
}

// dlqReplay: POST /v1/dlq/replay {"ids": [...]} | {"channel": "..."}; the
// service replays (service.Replay: ids it cannot replay are skipped, with
// the reason).
func (s *Server) dlqReplay(w http.ResponseWriter, r *http.Request) error {
	sel, e := decodeSelector(r.Body, true)
	if e != nil {
		return e
	}
	if _, ok := s.cfg.Channels[sel.Channel]; sel.IDs == nil && !ok {
		// Checked here too: the service reads an empty channel as "every
		// channel", which the API does not offer.
		return invalid("channel: %q is not configured on this instance; its dead letters cannot be replayed (purge them, or configure the channel)", sel.Channel)
	}
	out, err := s.ops.Replay(r.Context(), sel)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// dlqPurge: POST /v1/dlq/purge {"ids": [...]} and/or {"channel": "..."};
// the service purges (service.Purge).
func (s *Server) dlqPurge(w http.ResponseWriter, r *http.Request) error {
	sel, e := decodeSelector(r.Body, false)
	if e != nil {
		return e
	}
	out, err := s.ops.Purge(r.Context(), sel)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
