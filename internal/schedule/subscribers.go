package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Limits on subscriber input (docs/config.md, "Bounds"). An address is a
// recipient, so it has the outbox's recipient bound.
const (
	MaxExternalIDLen = 256
	MaxUpsertBatch   = 5000 // rows per statement; larger inputs are split
	// MaxAddresses and MaxTopics bound one subscriber's channels and topics.
	MaxAddresses = 100
	MaxTopics    = 100
	// MaxAttributesBytes bounds a subscriber's attributes as JSON: they are
	// rendered into every payload the subscriber gets.
	MaxAttributesBytes = 64 << 10
	// MaxDataReadBytes bounds a recipient's data as it is read back (a
	// subscriber's attributes, an audience query's data column): twice the
	// write bound, since jsonb writes a space after every ':' and ','. A row
	// past it (written by SQL of the application's own, before the number
	// bound) is refused where it is read, never built in memory.
	MaxDataReadBytes = 2 * MaxAttributesBytes
	// MaxAttributesDepth bounds their nesting.
	MaxAttributesDepth = 32
	// MaxAddressesReadBytes bounds a subscriber's addresses as they are read
	// back: MaxAddresses of them at MaxRecipientLen each fit with room to
	// spare; only a row written by SQL of the application's own passes it.
	MaxAddressesReadBytes = 256 << 10
	// MaxTopicsListed bounds the topics a subscriber's GET lists: Subscribe
	// (a topic's side) has no per-subscriber bound, so a subscriber may be
	// in any number of topics; past this the list is cut (TopicsCut).
	MaxTopicsListed = 1000
)

func validateSubscriber(i int, s wire.Subscriber) error {
	at := fmt.Sprintf("subscriber %d (%q)", i, s.ExternalID)
	if s.ExternalID == "" || len(s.ExternalID) > MaxExternalIDLen {
		return fmt.Errorf("subscriber %d: external_id must be 1..%d bytes: %w", i, MaxExternalIDLen, ErrInvalid)
	}
	if reason := textProblem(s.ExternalID); reason != "" {
		return fmt.Errorf("subscriber %d: external_id %s: %w", i, reason, ErrInvalid)
	}
	if len(s.Addresses) > MaxAddresses || len(s.Topics) > MaxTopics {
		return fmt.Errorf("%s: %d addresses and %d topics, at most %d and %d: %w",
			at, len(s.Addresses), len(s.Topics), MaxAddresses, MaxTopics, ErrInvalid)
	}
	for ch, addr := range s.Addresses {
		if !config.NameRE.MatchString(ch) {
			return fmt.Errorf("%s: address channel %q must match %s: %w", at, ch, config.NameRE, ErrInvalid)
		}
		if addr == "" {
			return fmt.Errorf("%s: address for channel %q is empty: %w", at, ch, ErrInvalid)
		}
		if len(addr) > outbox.MaxRecipientLen {
			return fmt.Errorf("%s: address for channel %q is %d bytes long, at most %d: %w",
				at, ch, len(addr), outbox.MaxRecipientLen, ErrInvalid)
		}
		if reason := textProblem(addr); reason != "" {
			return fmt.Errorf("%s: address for channel %q %s: %w", at, ch, reason, ErrInvalid)
		}
	}
	if s.Attributes != nil {
		if jsonDepth(s.Attributes) <= MaxAttributesDepth {
			if p := attributesTextProblem(map[string]any(s.Attributes), "attributes"); p != "" {
				return fmt.Errorf("%s: %s: %w", at, p, ErrInvalid)
			}
		}
		raw, err := json.Marshal(s.Attributes)
		switch {
		case err != nil:
			return fmt.Errorf("%s: attributes: %v: %w", at, err, ErrInvalid)
		case len(raw) > MaxAttributesBytes:
			return fmt.Errorf("%s: attributes are %d bytes as JSON, at most %d: %w", at, len(raw), MaxAttributesBytes, ErrInvalid)
		case wire.JSONNumberProblem(raw) != "":
			return fmt.Errorf("%s: attributes %s: %w", at, wire.JSONNumberProblem(raw), ErrInvalid)
		case jsonDepth(s.Attributes) > MaxAttributesDepth:
			return fmt.Errorf("%s: attributes nest deeper than %d: %w", at, MaxAttributesDepth, ErrInvalid)
		case bytes.Contains(raw, []byte(`\u0000`)) || !utf8.Valid(raw):
			return fmt.Errorf("%s: attributes contain a NUL character or invalid UTF-8: %w", at, ErrInvalid)
		}
	}
	for _, t := range s.Topics {
		if !config.NameRE.MatchString(t) {
			return fmt.Errorf("%s: topic %q must match %s: %w", at, t, config.NameRE, ErrInvalid)
		}
	}
	return nil
}

// textProblem says why s cannot be stored as text ("" when it can).
func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// jsonDepth is how deep v (decoded JSON) nests.
func jsonDepth(v any) int {
	switch v := v.(type) {
	case map[string]any:
		d := 0
		for _, e := range v {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	case []any:
		d := 0
		for _, e := range v {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	}
	return 0
}

// UpsertSubscribers inserts or replaces subscribers (addresses and attributes
// are replaced as given) and adds their topics (never removes any); their
// CreatedAt and UpdatedAt are ignored: one statement per batch of
// up to MaxUpsertBatch. A subscriber listed twice keeps its last entry. It
// returns how many subscribers were written.
func (s *Service) UpsertSubscribers(ctx context.Context, subs []wire.Subscriber) (int, error) {
	for i, sub := range subs {
		if err := validateSubscriber(i, sub); err != nil {
			return 0, err
		}
	}
	// Last entry wins: ON CONFLICT DO UPDATE may not touch a row twice in one
	// statement.
	last := make(map[string]int, len(subs))
	for i, sub := range subs {
		last[sub.ExternalID] = i
	}
	written := 0
	var batch []wire.Subscriber
	flush := func() error {
		n, err := s.upsertBatch(ctx, batch)
		written += n
		batch = batch[:0]
		return err
	}
	for i, sub := range subs {
		if last[sub.ExternalID] != i {
			continue
		}
		batch = append(batch, sub)
		if len(batch) == MaxUpsertBatch {
			if err := flush(); err != nil {
				return written, err
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return written, err
		}
	}
	return written, nil
}

func (s *Service) upsertBatch(ctx context.Context, subs []wire.Subscriber) (int, error) {
	ids := make([]string, len(subs))
	addrs := make([]string, len(subs))
	attrs := make([]string, len(subs))
	var topicIDs, topics []string
	for i, sub := range subs {
		ids[i] = sub.ExternalID
		a, err := json.Marshal(cmpMap(sub.Addresses))
		if err != nil {
			return 0, fmt.Errorf("subscriber %q: addresses: %w", sub.ExternalID, err)
		}
		b, err := json.Marshal(cmpMap(sub.Attributes))
		if err != nil {
			return 0, fmt.Errorf("subscriber %q: attributes: %w: %w", sub.ExternalID, err, ErrInvalid)
		}
		addrs[i], attrs[i] = string(a), string(b)
		for _, t := range sub.Topics {
			topicIDs = append(topicIDs, sub.ExternalID)
			topics = append(topics, t)
		}
	}
	now := s.now()
	var n int
	err := s.pool.QueryRow(ctx, `
		WITH up AS (
			INSERT INTO subscribers (external_id, addresses, attributes, created_at, updated_at)
			SELECT e, a::jsonb, t::jsonb, $6, $6 FROM unnest($1::text[], $2::text[], $3::text[]) AS u(e, a, t)
			ON CONFLICT (external_id) DO UPDATE
			SET addresses = EXCLUDED.addresses, attributes = EXCLUDED.attributes, updated_at = EXCLUDED.updated_at
			RETURNING id, external_id),
		subs AS (
			INSERT INTO topic_subscriptions (topic, subscriber_id, created_at)
			SELECT tp.topic, up.id, $6 FROM unnest($4::text[], $5::text[]) AS tp(e, topic) JOIN up ON up.external_id = tp.e
			ON CONFLICT DO NOTHING)
		SELECT count(*) FROM up`, ids, addrs, attrs, topicIDs, topics, now).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("upsert %d subscribers: %w", len(subs), err)
	}
	return n, nil
}

func cmpMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// getSubscriberSQL: $1 the external id. The attributes are read as an
// audience's data is (boundedDataCols, boundedDataJoin): printed once, read
// back only within MaxDataReadBytes.
var getSubscriberSQL = `
		SELECT external_id, CASE WHEN octet_length(ad.t) <= ` + strconv.Itoa(MaxAddressesReadBytes) + ` THEN ad.t END, octet_length(ad.t),
		       ` + boundedDataCols + `, created_at, updated_at,
		       coalesce((SELECT array_agg(topic ORDER BY topic) FROM (
		           SELECT topic FROM topic_subscriptions WHERE subscriber_id = s.id
		           ORDER BY topic LIMIT ` + strconv.Itoa(MaxTopicsListed+1) + `) tp), '{}')
		FROM subscribers s
		CROSS JOIN LATERAL (SELECT s.addresses::text OFFSET 0) ad(t)` + boundedDataJoin("s.attributes") + `WHERE external_id = $1`

// GetSubscriber returns a subscriber with every topic it is in (an empty
// list when none); ErrNotFound if there is none.
func (s *Service) GetSubscriber(ctx context.Context, externalID string) (wire.Subscriber, error) {
	var (
		sub                wire.Subscriber
		addrs, attrs       []byte
		addrsLen, attrsLen *int
	)
	err := s.pool.QueryRow(ctx, getSubscriberSQL, externalID).
		Scan(&sub.ExternalID, &addrs, &addrsLen, &attrs, &attrsLen, &sub.CreatedAt, &sub.UpdatedAt, &sub.Topics)
	if errors.Is(err, pgx.ErrNoRows) {
		return wire.Subscriber{}, fmt.Errorf("subscriber %q: %w", externalID, ErrNotFound)
	}
	if err != nil {
		return wire.Subscriber{}, fmt.Errorf("get subscriber %q: %w", externalID, err)
	}
	if addrs == nil && addrsLen != nil {
		return wire.Subscriber{}, fmt.Errorf("subscriber %q: its stored addresses read back as %d bytes, over the %d-byte bound "+
			"(written past the API's checks); PUT the subscriber again to replace them: %w", externalID, *addrsLen, MaxAddressesReadBytes, ErrInvalid)
	}
	if len(sub.Topics) > MaxTopicsListed {
		sub.Topics, sub.TopicsCut = sub.Topics[:MaxTopicsListed], true
	}
	if err := json.Unmarshal(addrs, &sub.Addresses); err != nil {
		return wire.Subscriber{}, fmt.Errorf("subscriber %q: addresses: %w", externalID, err)
	}
	if attrs == nil && attrsLen != nil {
		return wire.Subscriber{}, fmt.Errorf("subscriber %q: its stored attributes read back as %d bytes, over the %d-byte bound "+
			"(written past the API's checks); PUT the subscriber again to replace them: %w", externalID, *attrsLen, MaxDataReadBytes, ErrInvalid)
	}
	if attrs != nil {
		// Numbers stay exact (json.Number), as they were written.
		dec := json.NewDecoder(bytes.NewReader(attrs))
		dec.UseNumber()
		if err := dec.Decode(&sub.Attributes); err != nil {
			return wire.Subscriber{}, fmt.Errorf("subscriber %q: attributes: %w", externalID, err)
		}
	}
	if sub.Topics == nil {
		sub.Topics = []string{}
	}
	return sub, nil
}

// DeleteSubscriber removes a subscriber and its subscriptions; ErrNotFound if
// there was none. Notifications already materialised for it stay.
func (s *Service) DeleteSubscriber(ctx context.Context, externalID string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM subscribers WHERE external_id = $1`, externalID)
	if err != nil {
		return fmt.Errorf("delete subscriber %q: %w", externalID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("subscriber %q: %w", externalID, ErrNotFound)
	}
	return nil
}

// Subscribe adds subscribers to a topic and returns how many were newly
// added. Every external id must exist; if any does not, nothing changes and
// the error lists them.
func (s *Service) Subscribe(ctx context.Context, topic string, externalIDs []string) (int, error) {
	return s.changeTopic(ctx, topic, externalIDs, func(tx pgx.Tx) (pgconn.CommandTag, error) {
		return tx.Exec(ctx, `
			INSERT INTO topic_subscriptions (topic, subscriber_id, created_at)
			SELECT $1, id, $3 FROM subscribers WHERE external_id = ANY($2)
			ON CONFLICT DO NOTHING`, topic, externalIDs, s.now())
	})
}

// Unsubscribe removes subscribers from a topic and returns how many were in
// it. Every external id must exist, as for Subscribe.
func (s *Service) Unsubscribe(ctx context.Context, topic string, externalIDs []string) (int, error) {
	return s.changeTopic(ctx, topic, externalIDs, func(tx pgx.Tx) (pgconn.CommandTag, error) {
		return tx.Exec(ctx, `
			DELETE FROM topic_subscriptions
			WHERE topic = $1 AND subscriber_id IN (SELECT id FROM subscribers WHERE external_id = ANY($2))`,
			topic, externalIDs)
	})
}

func (s *Service) changeTopic(ctx context.Context, topic string, externalIDs []string, change func(pgx.Tx) (pgconn.CommandTag, error)) (int, error) {
	if !config.NameRE.MatchString(topic) {
		return 0, fmt.Errorf("topic %q must match %s: %w", topic, config.NameRE, ErrInvalid)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var found []string
		if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(external_id), '{}') FROM subscribers WHERE external_id = ANY($1)`,
			externalIDs).Scan(&found); err != nil {
			return err
		}
		have := make(map[string]bool, len(found))
		for _, id := range found {
			have[id] = true
		}
		var missing []string
		for _, id := range externalIDs {
			if !have[id] {
				have[id] = true // list each once
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			if len(missing) > 10 {
				missing = append(missing[:10], fmt.Sprintf("… %d more", len(missing)-10))
			}
			return fmt.Errorf("unknown subscribers %q: %w", missing, ErrNotFound)
		}
		tag, err := change(tx)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("topic %q: %w", topic, err)
	}
	return int(n), nil
}

// TopicInfo is a topic and how many subscribers it has.
type TopicInfo struct {
	Name        string `json:"name"`
	Subscribers int64  `json:"subscribers"`
}

// Topics lists every topic with its subscriber count.
func (s *Service) Topics(ctx context.Context) ([]TopicInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT topic, count(*) FROM topic_subscriptions GROUP BY topic ORDER BY topic`)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TopicInfo, error) {
		var t TopicInfo
		err := r.Scan(&t.Name, &t.Subscribers)
		return t, err
	})
}
