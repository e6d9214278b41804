package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// querier is what audiences read through: a pool, a connection or a tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// recipientRow is one audience member as read from the database.
type recipientRow struct {
	key       string // the cursor after this member (its key as text)
	recipient string
	ok        bool // false: no address on the channel (topic) or NULL recipient (query): skipped
	// overLen is the recipient's length in bytes when it reads back past
	// MaxRecipientLen (0 when it does not); recipient then holds only its
	// first MaxRecipientLen characters and overSum the hex SHA-256 of the
	// whole, both computed in Postgres: however long an address a row
	// holds, this process reads at most 4 × MaxRecipientLen bytes of it.
	overLen int64
	overSum string
	data    []byte // JSON, nil when there is none
	// dataProblem says why data was not read ("" when it was): it reads
	// back past MaxDataReadBytes. That recipient is FAILED with it.
	dataProblem string
}

// boundedDataCols selects the text of the JSON that boundedDataJoin prints
// once per row, only when it reads back within MaxDataReadBytes, and its
// length: a row whose numbers expand (1e100000 is 100,001 digits once
// printed) is measured in Postgres and never reaches this process. OFFSET 0
// keeps d a subquery of its own: flattened, as the planner does with a plain
// one, its expression would be printed once for each of the three reads of
// d.t.
const boundedDataCols = `CASE WHEN octet_length(d.t) <= 131072 THEN d.t END, octet_length(d.t)`

func boundedDataJoin(expr string) string {
	return ` CROSS JOIN LATERAL (SELECT (` + expr + `)::text AS t OFFSET 0) d `
}

// boundedRecipientCols reads the recipient text v (a column of a subquery
// fenced with OFFSET 0, so it is printed once) within MaxRecipientLen: the
// whole when it fits, else its first MaxRecipientLen characters, its length
// in bytes and the hex SHA-256 of the whole, which the FAILED row's
// idempotency key is made from (failedFor).
func boundedRecipientCols(v string) string {
	n := strconv.Itoa(outbox.MaxRecipientLen)
	return `CASE WHEN octet_length(` + v + `) <= ` + n + ` THEN ` + v + ` ELSE left(` + v + `, ` + n + `) END, ` +
		`CASE WHEN octet_length(` + v + `) > ` + n + ` THEN octet_length(` + v + `)::bigint END, ` +
		`CASE WHEN octet_length(` + v + `) > ` + n + ` THEN encode(sha256(convert_to(` + v + `, 'UTF8')), 'hex') END`
}

// scanRecipient fills r's recipient from boundedRecipientCols' three.
func (r *recipientRow) scanRecipient(text *string, overLen *int64, overSum *string) {
	if text == nil || *text == "" {
		return
	}
	r.recipient, r.ok = *text, true
	if overLen != nil && overSum != nil {
		r.overLen, r.overSum = *overLen, *overSum
	}
}

// problem says why the recipient cannot be stored as one ("" when it can).
func (r *recipientRow) problem() string {
	if r.overLen > 0 {
		return fmt.Sprintf("recipient is %d bytes long, at most %d (stored cut here)", r.overLen, outbox.MaxRecipientLen)
	}
	return checkRecipient(r.recipient)
}

// failed is the FAILED notification of this member, with reason.
func (r *recipientRow) failed(reason string) failedRow {
	if r.overLen > 0 {
		return failedForSum(r.recipient, r.overSum, reason)
	}
	return failedFor(r.recipient, reason)
}

// maxKeyLen bounds an audience query's key column as it reads back: the key
// is the job's cursor, stored and sent back with every chunk.
const maxKeyLen = 1024

func dataProblem(data []byte, n *int) string {
	if data != nil || n == nil {
		return ""
	}
	return fmt.Sprintf("its data (subscriber attributes, or the audience query's data column) reads back as %d bytes, over the %d-byte bound", *n, MaxDataReadBytes)
}

// MaxChunkBytes bounds what one chunk holds at once: the data and
// recipients a page reads (each member's within MaxDataReadBytes), and the
// payloads the chunk renders (each within the payload bound). Each member is
// bounded, but a chunk held all of its members at once: 1,000 payloads of
// 240 KB were 240 MB a chunk, several times that with the buffer's doubling
// and the chunk read ahead, and chunk_size may be 10,000. A page or a chunk
// stops at the end of the member that passes it (so it always holds one);
// the next goes on from that member's key.
const MaxChunkBytes = 16 << 20

// chunk is one keyset page of an audience.
type chunk struct {
	rows    []recipientRow
	lastKey string // the cursor after this chunk; "" when rows is empty
	// cut says the page stopped at MaxChunkBytes, before its limit: it is
	// not the audience's last, however few rows it has.
	cut bool
}

// add appends r and says whether the page is full by bytes (held counts
// what its rows hold).
func (c *chunk) add(r recipientRow, held *int) bool {
	c.rows = append(c.rows, r)
	c.lastKey = r.key
	*held += len(r.data) + len(r.recipient) + len(r.key)
	c.cut = *held >= MaxChunkBytes
	return c.cut
}

// audienceSource reads an audience in keyset order. The cursor is the text
// form of the last key read, "" for the beginning.
type audienceSource interface {
	count(ctx context.Context, q querier) (int64, error)
	fetch(ctx context.Context, q querier, cursor string, limit int) (chunk, error)
}

// newAudience builds the reader for a job's audience on a channel.
func newAudience(a wire.Audience, channel string) (audienceSource, error) {
	switch {
	case a.Topic != "" && a.Query == "":
		return topicAudience{topic: a.Topic, channel: channel}, nil
	case a.Query != "" && a.Topic == "":
		if a.Key == "" {
			return nil, errors.New("audience.key is required with audience.query: the column used for keyset paging")
		}
		return newQueryAudience(a.Query, a.Key), nil
	default:
		return nil, errors.New("audience: give exactly one of topic or query")
	}
}

// topicAudience is a topic's subscribers, addressed on the channel; the key
// is the subscriber id, the data the subscriber's attributes.
type topicAudience struct {
	topic, channel string
}

func (a topicAudience) count(ctx context.Context, q querier) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM topic_subscriptions WHERE topic = $1`, a.topic).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count topic %q: %w", a.topic, err)
	}
	return n, nil
}

// topicPageSQL reads a page of a topic's subscribers: $1 the topic, $2 the
// channel (the address read), $3 the last subscriber id read.
func topicPageSQL(limit int) string {
	return `
		SELECT ts.subscriber_id, ` + boundedRecipientCols("a.v") + `, ` + boundedDataCols + `
		FROM (SELECT subscriber_id FROM topic_subscriptions
		      WHERE topic = $1 AND subscriber_id > $3
		      ORDER BY subscriber_id LIMIT ` + strconv.Itoa(limit) + `) ts
		JOIN subscribers s ON s.id = ts.subscriber_id
		CROSS JOIN LATERAL (SELECT s.addresses ->> $2 OFFSET 0) a(v)` + boundedDataJoin("s.attributes") + `
		ORDER BY ts.subscriber_id`
}

func (a topicAudience) fetch(ctx context.Context, q querier, cursor string, limit int) (chunk, error) {
	var after int64
	if cursor != "" {
		var err error
		if after, err = strconv.ParseInt(cursor, 10, 64); err != nil {
			return chunk{}, permanent(fmt.Errorf("topic %q: cursor %q is not a subscriber id", a.topic, cursor))
		}
	}
	// The page of ids is limited before the join so that the join is 1,000
	// index lookups, and the LIMIT is a literal: with LIMIT $n a cached
	// generic plan guesses a third of the table and hash- or merge-joins all
	// of subscribers on every chunk (measured: 135 ms a chunk at 1M, not 2).
	rows, err := q.Query(ctx, topicPageSQL(limit), a.topic, a.channel, after)
	if err != nil {
		return chunk{}, fmt.Errorf("read topic %q: %w", a.topic, err)
	}
	defer rows.Close()
	c := chunk{rows: make([]recipientRow, 0, limit)}
	var (
		id      int64
		addr    *string
		addrLen *int64
		addrSum *string
		data    []byte
		dataLen *int
		held    int
	)
	for rows.Next() {
		if err := rows.Scan(&id, &addr, &addrLen, &addrSum, &data, &dataLen); err != nil {
			return chunk{}, fmt.Errorf("read topic %q: %w", a.topic, err)
		}
		r := recipientRow{key: strconv.FormatInt(id, 10), data: data, dataProblem: dataProblem(data, dataLen)}
		r.scanRecipient(addr, addrLen, addrSum)
		if c.add(r, &held) {
			break // the rest of the page is read again after this member
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return chunk{}, fmt.Errorf("read topic %q: %w", a.topic, err)
	}
	return c, nil
}

// queryAudience is an operator's SQL query returning recipient, optionally
// data (any type; sent to templates as JSON) and the key column, which must
// be unique and orderable: it is the keyset cursor.
type queryAudience struct {
	query, key         string
	first, next, total string
	// timeout bounds each statement run on the query (count, page, check):
	// MaxAudienceStatement unless the Service says otherwise.
	timeout time.Duration
}

// MaxAudienceStatement bounds each statement an audience query runs — its
// count, each page, its column check. A query past it fails its job with
// the reason: it held a pool connection and one of the instance's job slots
// for as long as it ran (heartbeats and all), and after a restart the next
// instance ran it again. A page of an indexed query takes milliseconds, and
// the count of millions seconds.
const MaxAudienceStatement = 5 * time.Minute

// bounded runs f with ctx bounded by the query's statement timeout, and
// makes a statement that passed it a permanent error naming the bound.
func (a *queryAudience) bounded(ctx context.Context, what string, f func(context.Context) error) error {
	d := cmp.Or(a.timeout, MaxAudienceStatement)
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := f(sctx)
	if err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
		return permanent(fmt.Errorf("audience query: %s did not finish within %s (the bound on one audience statement, schedule.MaxAudienceStatement): "+
			"make the query answer sooner (an index on its key column %q, fewer joins) or split the audience", what, d, a.key))
	}
	return err
}

func newQueryAudience(query, key string) *queryAudience {
	query = strings.TrimRight(strings.TrimSpace(query), "; \t\r\n")
	k := pgx.Identifier{key}.Sanitize()
	a := &queryAudience{query: query, key: key}
	// data is filled in by check once the columns are known; until then the
	// statements select it as NULL-safe JSON.
	a.build(k, "to_jsonb(q.data)")
	return a
}

func (a *queryAudience) build(k, data string) {
	// The key travels as text both ways: read as k::text, and sent back as a
	// text-format parameter that Postgres parses as the key's own type, so
	// any orderable key (bigint, uuid, text, timestamptz) pages correctly.
	// The recipient and the key are printed once, in v (OFFSET 0), and read
	// back within their bounds: the recipient by boundedRecipientCols, the
	// key only when it is at most maxKeyLen bytes (its length always).
	sel := `SELECT ` + boundedRecipientCols("v.r") + `, ` + boundedDataCols +
		`, CASE WHEN octet_length(v.k) <= ` + strconv.Itoa(maxKeyLen) + ` THEN v.k END, octet_length(v.k)` +
		` FROM (` + a.query + `) q CROSS JOIN LATERAL (SELECT q.recipient::text, q.` + k + `::text OFFSET 0) v(r, k)` +
		boundedDataJoin(data)
	// The chunk size is appended as a literal (see topicAudience.fetch).
	a.first = sel + `ORDER BY q.` + k + ` LIMIT `
	a.next = sel + `WHERE q.` + k + ` > $1 ORDER BY q.` + k + ` LIMIT `
	// The total counts NULL and repeated keys too: keyset paging (k > $1)
	// passes over them, so they are refused before any row is written.
	a.total = `SELECT count(*), count(*) - count(q.` + k + `), count(q.` + k + `) - count(DISTINCT q.` + k + `) FROM (` + a.query + `) q`
}

// check runs the query with LIMIT 0 and makes sure it returns recipient and
// the key column; a query without a data column gets empty data.
func (a *queryAudience) check(ctx context.Context, q querier) error {
	return a.bounded(ctx, "its column check", func(ctx context.Context) error { return a.checkColumns(ctx, q) })
}

func (a *queryAudience) checkColumns(ctx context.Context, q querier) error {
	rows, err := q.Query(ctx, `SELECT * FROM (`+a.query+`) q LIMIT 0`)
	if err != nil {
		return fmt.Errorf("audience query fails: %w", classify(err))
	}
	// The descriptions live in the connection's buffer: they are read
	// before Close hands the connection back to the pool, where the next
	// query overwrites them (the race detector caught exactly that).
	have := map[string]bool{}
	var names []string
	for _, f := range rows.FieldDescriptions() {
		have[f.Name] = true
		names = append(names, f.Name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audience query fails: %w", classify(err))
	}
	for _, col := range []string{"recipient", a.key} {
		if !have[col] {
			return permanent(fmt.Errorf("audience query returns no column %q (it returns: %s); it must return recipient, the key column (audience.key) and optionally data",
				col, strings.Join(names, ", ")))
		}
	}
	if !have["data"] {
		a.build(pgx.Identifier{a.key}.Sanitize(), `'{}'::jsonb`)
	}
	return nil
}

func (a *queryAudience) count(ctx context.Context, q querier) (int64, error) {
	var n, nulls, repeats int64
	if err := a.bounded(ctx, "its count", func(ctx context.Context) error {
		if err := q.QueryRow(ctx, a.total).Scan(&n, &nulls, &repeats); err != nil {
			return fmt.Errorf("count audience query: %w", classify(err))
		}
		return nil
	}); err != nil {
		return 0, err
	}
	switch {
	case nulls > 0:
		return 0, permanent(fmt.Errorf("audience query returned %d of %d rows with a NULL %s: the key column must not be NULL (keyset paging would pass over them)",
			nulls, n, a.key))
	case repeats > 0:
		return 0, permanent(fmt.Errorf("audience query returned %d of %d rows whose %s repeats another row's: the key column must be unique (keyset paging would pass over a repeat that falls past a chunk's end)",
			repeats, n, a.key))
	}
	return n, nil
}

func (a *queryAudience) fetch(ctx context.Context, q querier, cursor string, limit int) (c chunk, err error) {
	err = a.bounded(ctx, fmt.Sprintf("a page of %d after %q", limit, wire.Truncate(cursor, 64)), func(ctx context.Context) error {
		c, err = a.page(ctx, q, cursor, limit)
		return err
	})
	return c, err
}

func (a *queryAudience) page(ctx context.Context, q querier, cursor string, limit int) (chunk, error) {
	var (
		rows pgx.Rows
		err  error
	)
	if cursor == "" {
		rows, err = q.Query(ctx, a.first+strconv.Itoa(limit))
	} else {
		rows, err = q.Query(ctx, a.next+strconv.Itoa(limit), cursor)
	}
	if err != nil {
		return chunk{}, fmt.Errorf("read audience query: %w", classify(err))
	}
	defer rows.Close()
	c := chunk{rows: make([]recipientRow, 0, limit)}
	var (
		rcpt    *string
		rcptLen *int64
		rcptSum *string
		data    []byte
		dataLen *int
		key     *string
		keyLen  *int
		held    int
	)
	for rows.Next() {
		if err := rows.Scan(&rcpt, &rcptLen, &rcptSum, &data, &dataLen, &key, &keyLen); err != nil {
			return chunk{}, fmt.Errorf("read audience query: %w", err)
		}
		if key == nil && keyLen != nil {
			return chunk{}, permanent(fmt.Errorf("audience query returned a %s of %d bytes, over the %d-byte bound: the key column is the run's cursor, a short orderable value such as an id",
				a.key, *keyLen, maxKeyLen))
		}
		if key == nil {
			return chunk{}, permanent(fmt.Errorf("audience query returned a NULL %s: the key column must not be NULL", a.key))
		}
		r := recipientRow{key: *key, data: data, dataProblem: dataProblem(data, dataLen)}
		r.scanRecipient(rcpt, rcptLen, rcptSum)
		if c.add(r, &held) {
			break // the rest of the page is read again after this member
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return chunk{}, fmt.Errorf("read audience query: %w", classify(err))
	}
	return c, nil
}

// permanentError marks a failure that retrying cannot fix (a broken query, a
// template that does not render): the job goes FAILED instead of being
// retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

// classify marks SQL errors in the query itself (syntax, undefined column,
// permission, bad data) as permanent; connection trouble stays retryable.
func classify(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code[:2] {
		case "42", "22", "21", "2B", "0A", "28":
			return permanent(err)
		}
	}
	return err
}

// The literal in boundedDataCols (a constant, so the statement text stays
// fixed) is MaxDataReadBytes.
var _ = [1]struct{}{}[MaxDataReadBytes-131072]
