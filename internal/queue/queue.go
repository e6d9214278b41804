// Package queue is notifyd's reliable Redis queue, one per channel: an id is
// never popped and forgotten. Fetch moves it atomically from the channel's
// ready list into the fetching instance's own processing list; it leaves
// that list only through Ack (done), Retry (to the delayed set) or Dead (to
// the dead list), each one Lua script, and only once the caller has made the
// outcome durable in Postgres. An instance that dies keeps its processing
// list; when its lease runs out, Reap hands the list back to ready.
//
// Keys (docs/design.md §3), all of one channel in one hash slot for Redis Cluster:
//
//	<prefix>:{ch:<channel>}:ready                 LIST, pushed left, fetched right (FIFO)
//	<prefix>:{ch:<channel>}:delayed               ZSET, score = due time in Unix ms
//	<prefix>:{ch:<channel>}:processing:<instance> LIST, an instance's fetched ids
//	<prefix>:{ch:<channel>}:instances             ZSET, instance -> lease expiry in Unix ms
//	<prefix>:{ch:<channel>}:members               SET, every id in ready, delayed or a processing list
//	<prefix>:{ch:<channel>}:dead                  LIST, newest first
//	<prefix>:{ch:<channel>}:epoch                 STRING, random; a new value means this slot's shard lost its data
//	<prefix>:epoch                                STRING, random; a new value means Redis lost its data
//
// Ids are Postgres notification ids, kept in Redis as decimal strings. Times
// (due, lease expiry) are the callers' clocks in Unix milliseconds, so
// instances' clocks must agree to well within a lease TTL (NTP).
package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoLease is returned by Fetch for an instance that holds no live lease
// (never renewed, expired, reaped or released): ids fetched then would sit in
// a processing list no reaper watches.
var ErrNoLease = errors.New("instance holds no live lease; call Renew first")

// maxPerCall bounds the ids one script call handles, so a huge batch never
// stalls Redis for long; bigger batches are split into several calls. It is
// also the chunk Reap moves a processing list in, the page Pending reads one
// in, and (twice over) the window of the dead list DeadOnce looks at.
const maxPerCall = 5000

// Bounds on the times the queue keeps (docs/config.md, Bounds). Redis'
// contents are not trusted to have been written by this package: a score
// of +inf, or one days ahead (an instance whose clock was, a restore, an
// operator's ZADD), would otherwise be waited for for good: Promote never
// reaches the delayed id, Reap never the dead instance's lease, and since
// their ids stay members no push (the sweeper's, the resync's) can queue
// them again.
const (
	// MaxDelay is the furthest ahead a delayed id is parked in one go: a
	// later due is written as now + MaxDelay. The longest wait notifyd
	// asks for is a retry's, at most retry.max_retry_after (168h at most)
	// or retry.max, whichever is longer; a due beyond MaxDelay (a retry.max
	// of weeks) costs one early wake-up every MaxDelay, which the claim
	// turns into another wait: it checks the row's own due time in
	// Postgres, the truth, and defers it again.
	MaxDelay = 8 * 24 * time.Hour
	// MaxLeaseTTL is the longest lease Renew grants (delivery.lease_ttl is
	// seconds as a rule: it is how long a dead instance's work waits).
	MaxLeaseTTL = time.Hour
	// delaySlack and leaseSlack are how far ahead of the reader's clock a
	// writer's may be before what it wrote counts as corrupt. Instances' clocks must agree
	// to well within a lease TTL anyway (see the package comment); a day
	// for delays and an hour for leases leave room for far worse.
	delaySlack = 24 * time.Hour
	leaseSlack = time.Hour
)

// delayHorizon is the latest delayed score that can be a due this package
// wrote, read at now: past it, a score is corrupt (scriptPush, scriptPromote).
func delayHorizon(now time.Time) int64 { return unixMs(now.Add(MaxDelay + delaySlack)) }

// leaseHorizon is the latest lease expiry a Renew can have written, read at
// now: past it, the lease counts as expired (scriptReap).
func leaseHorizon(now time.Time) int64 { return unixMs(now.Add(MaxLeaseTTL + leaseSlack)) }

// Queue is the set of reliable queues under one key prefix. It is safe for
// concurrent use.
type Queue struct {
	c      redis.UniversalClient
	prefix string

	mu     sync.Mutex
	epochs map[string]string // epoch key -> the value this Queue last saw
}

// New returns the queues under prefix on c.
func New(c redis.UniversalClient, prefix string) *Queue {
	return &Queue{c: c, prefix: prefix}
}

// Client is the Redis client the queues use (other per-channel state, such
// as rate limits, lives beside them under the same hash tags).
func (q *Queue) Client() redis.UniversalClient { return q.c }

// Prefix is the key prefix of these queues.
func (q *Queue) Prefix() string { return q.prefix }

// Item is an id to queue and when it is due. A zero or past Due means ready
// now; a future Due parks it in the delayed set until Promote.
type Item struct {
	ID  int64
	Due time.Time
}

// Stats is one channel's queue sizes.
type Stats struct {
	Ready, Delayed, Processing, Dead int64
	Instances                        int // instances holding an unexpired lease
}

type keys struct{ base string }

func (q *Queue) keys(channel string) keys {
	return keys{base: q.prefix + ":{ch:" + channel + "}:"}
}

func (k keys) ready() string     { return k.base + "ready" }
func (k keys) delayed() string   { return k.base + "delayed" }
func (k keys) instances() string { return k.base + "instances" }
func (k keys) members() string   { return k.base + "members" }
func (k keys) dead() string      { return k.base + "dead" }
func (k keys) processing(instance string) string {
	return k.base + "processing:" + instance
}

// ErrChannelName is wrapped by every error that refuses a channel for its
// name alone. No later call takes that name either, so a caller holding work
// for such a channel must finish the work rather than retry it (the relay's
// rows on a channel an application's SQL named: delivery.pushQueued).
var ErrChannelName = errors.New("bad channel name")

// checkChannel rejects names that would break the {ch:<channel>} hash tag.
func checkChannel(channel string) error {
	if channel == "" {
		return fmt.Errorf("%w: it is empty", ErrChannelName)
	}
	if strings.ContainsAny(channel, "{}") {
		return fmt.Errorf("%w %q: { or } would break its hash tag", ErrChannelName, channel)
	}
	return nil
}

func checkInstance(instance string) error {
	if instance == "" {
		return errors.New("instance id is empty")
	}
	return nil
}

func check(channel, instance string) error {
	if err := checkChannel(channel); err != nil {
		return err
	}
	return checkInstance(instance)
}

func unixMs(t time.Time) int64 { return t.UnixMilli() }

// dueArg is the script's due argument: 0 for ready now, else the due time in
// Unix ms (never 0 itself, since any due that is not after now means ready),
// at most now + MaxDelay.
func dueArg(due, now time.Time) int64 {
	if due.IsZero() || !due.After(now) {
		return 0
	}
	if limit := now.Add(MaxDelay); due.After(limit) {
		due = limit
	}
	return max(unixMs(due), 1)
}

// itemArgs turns items into id, due argument pairs.
func itemArgs(items []Item, now time.Time) []any {
	args := make([]any, 0, 2*len(items))
	for _, it := range items {
		args = append(args, it.ID, dueArg(it.Due, now))
	}
	return args
}

func idArgs(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

// runChunks runs script once per maxPerCall ids (argsPerID arguments each),
// each call's arguments led by head, and sums the integer replies.
func (q *Queue) runChunks(ctx context.Context, script *redis.Script, keys []string, head, args []any, argsPerID int) (int, error) {
	total := 0
	step := maxPerCall * argsPerID
	for start := 0; start < len(args); start += step {
		end := min(start+step, len(args))
		part := args[start:end]
		if len(head) > 0 {
			part = append(slices.Clip(head), part...)
		}
		n, err := q.eval(ctx, script, keys, part...).Int()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// ErrWrongType is wrapped by the error of a call that found one of its keys
// of the wrong type (another program's SET on a queue's list, an operator's
// mistake). The script checks every key before it writes anything; the key
// is then renamed aside (to <base>wrongtype:<its name>, one copy a key, for
// an operator to look at) and the call fails with this error once, naming
// it: the caller's retry finds the key gone and works.
var ErrWrongType = errors.New("queue key of the wrong type moved aside")

// eval runs script (one of those whose Lua starts with wrong_type) and
// moves aside a key it reports of the wrong type.
func (q *Queue) eval(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := script.Run(ctx, q.c, keys, args...)
	err := cmd.Err()
	if err == nil || !strings.HasPrefix(err.Error(), "NOTIFYD_WRONGTYPE ") {
		return cmd
	}
	f := strings.Fields(err.Error())
	i, perr := strconv.Atoi(f[1])
	if perr != nil || i < 1 || i > len(keys) || len(f) < 4 {
		return cmd
	}
	key := keys[i-1]
	aside := q.aside(key)
	if rerr := q.c.Rename(ctx, key, aside).Err(); rerr != nil {
		cmd.SetErr(fmt.Errorf("%w: %s is a %s, not a %s; moving it aside to %s failed: %w", ErrWrongType, key, f[2], f[3], aside, rerr))
		return cmd
	}
	cmd.SetErr(fmt.Errorf("%w: %s was a %s, not a %s; moved it aside to %s", ErrWrongType, key, f[2], f[3], aside))
	return cmd
}

// aside is where a key of the wrong type goes: beside it, in the same hash
// slot, under a name no queue key has.
func (q *Queue) aside(key string) string {
	if i := strings.Index(key, "}:"); i >= 0 {
		return key[:i+2] + "wrongtype:" + key[i+2:]
	}
	return key + ":wrongtype"
}

// Push queues items on channel: ready now, or delayed until a future Due.
// An id already in the queue (ready, delayed or being processed) is left as
// it is, so a retry pushed again by the sweeper keeps its backoff, unless it
// is delayed past what any due this package writes can be (MaxDelay, read
// with a day's slack for clocks): that score is corrupt, and the id is
// placed anew as items say. Of ids repeated within items the first wins. A
// Due later than now + MaxDelay is parked until then. Returns how many ids
// were new.
func (q *Queue) Push(ctx context.Context, channel string, items []Item) (added int, err error) {
	if err := checkChannel(channel); err != nil {
		return 0, fmt.Errorf("queue: push: %w", err)
	}
	if len(items) == 0 {
		return 0, nil
	}
	k := q.keys(channel)
	now := time.Now()
	n, err := q.runChunks(ctx, scriptPush, []string{k.members(), k.ready(), k.delayed()}, []any{delayHorizon(now)}, itemArgs(items, now), 2)
	if err != nil {
		return n, fmt.Errorf("queue: push %d ids to %s: %w", len(items), channel, err)
	}
	return n, nil
}

// Fetch moves up to max of channel's oldest ready ids into instance's
// processing list and returns them, oldest first. When ready is empty it
// blocks up to wait (0: not at all) for a push, waking as soon as one lands.
// The instance must hold a live lease (Renew), else ErrNoLease.
//
// If Fetch returns an error other than ErrNoLease, ids may have moved anyway
// (the reply was lost): the caller should re-read Pending before trusting its
// in-memory view of what it holds. An error wrapping ErrBadMember comes with
// the valid ids fetched, which the caller should handle.
//
// A blocked Fetch does not notice ctx being cancelled until wait runs out
// (go-redis does not interrupt a blocking read), so keep wait short, about a
// second.
func (q *Queue) Fetch(ctx context.Context, channel, instance string, max int, wait time.Duration) ([]int64, error) {
	if err := check(channel, instance); err != nil {
		return nil, fmt.Errorf("queue: fetch: %w", err)
	}
	if max < 1 {
		return nil, fmt.Errorf("queue: fetch from %s: max must be at least 1, got %d", channel, max)
	}
	if wait < 0 {
		return nil, fmt.Errorf("queue: fetch from %s: wait must not be negative, got %s", channel, wait)
	}
	k := q.keys(channel)
	fetchKeys := []string{k.ready(), k.processing(instance), k.instances()}
	raw, err := q.fetchNow(ctx, fetchKeys, instance, max, true)
	if err != nil || len(raw) > 0 || wait == 0 {
		ids, bad := q.keepIDs(ctx, k, instance, raw)
		if err = errors.Join(err, bad); err != nil {
			err = fmt.Errorf("queue: fetch from %s for %s: %w", channel, instance, err)
		}
		return ids, err
	}
	first, ok, err := q.blockMove(ctx, k.ready(), k.processing(instance), wait)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("queue: fetch from %s for %s: wait for a push: %w", channel, instance, err)
		}
		return nil, err
	}
	raw = []string{first}
	if max > 1 {
		// The lease was checked an instant ago; checking again could
		// strand the id BLMOVE just moved.
		var rest []string
		rest, err = q.fetchNow(ctx, fetchKeys, instance, max-1, false)
		raw = append(raw, rest...)
	}
	ids, bad := q.keepIDs(ctx, k, instance, raw)
	if err = errors.Join(err, bad); err != nil {
		err = fmt.Errorf("queue: fetch from %s for %s: %w", channel, instance, err)
	}
	return ids, err
}

// fetchNow runs scriptFetch and returns the members it moved, oldest first.
func (q *Queue) fetchNow(ctx context.Context, keys []string, instance string, max int, lease bool) ([]string, error) {
	checkLease := "0"
	if lease {
		checkLease = "1"
	}
	res, err := q.eval(ctx, scriptFetch, keys, max, instance, unixMs(time.Now()), checkLease).Result()
	if err != nil {
		return nil, err
	}
	if n, ok := res.(int64); ok && n == -1 {
		return nil, ErrNoLease
	}
	vals, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected script reply %T", res)
	}
	raw := make([]string, len(vals))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected member %v (%T) in script reply", v, v)
		}
		raw[i] = s
	}
	return raw, nil
}

// ErrBadMember is wrapped by the error of a Fetch or Pending that met
// members of instance's processing list that are not notification ids as
// the queue writes them (strconv.FormatInt): written by another program, a
// corruption or a partial restore. Such a member is taken out of the
// processing list and the members set when it is met, so it is reported
// once; the ids returned with the error are valid and in the processing
// list, to be handled as usual.
var ErrBadMember = errors.New("queue members that are not notification ids were dropped")

// keepIDs splits members read from instance's processing list into the ids
// they are and the members that are none (not the decimal form of an int64
// that strconv.FormatInt gives: an id Ack could never remove), which it
// drops from the processing list and the members set. The error names them
// (wrapping ErrBadMember, and the drop's own error if it failed).
func (q *Queue) keepIDs(ctx context.Context, k keys, instance string, raw []string) ([]int64, error) {
	ids := make([]int64, 0, len(raw))
	var bad []string
	var canon [20]byte // an int64 in decimal: the comparison allocates nothing
	for _, s := range raw {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || string(strconv.AppendInt(canon[:0], id, 10)) != s {
			bad = append(bad, s)
			continue
		}
		ids = append(ids, id)
	}
	if len(bad) == 0 {
		return ids, nil
	}
	args := make([]any, len(bad))
	for i, s := range bad {
		args[i] = s
	}
	_, derr := q.runChunks(ctx, scriptDrop, []string{k.processing(instance), k.members()}, nil, args, 1)
	var quoted []string
	for _, s := range bad[:min(len(bad), 3)] {
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		quoted = append(quoted, strconv.Quote(s))
	}
	more := ""
	if len(bad) > len(quoted) {
		more = fmt.Sprintf(" and %d more", len(bad)-len(quoted))
	}
	err := fmt.Errorf("%w: %d from %s's backup list (%s%s)", ErrBadMember, len(bad), instance, strings.Join(quoted, ", "), more)
	if derr != nil {
		err = fmt.Errorf("%w; dropping them failed: %w", err, derr)
	}
	return ids, err
}

// blockMove waits up to wait for an id to arrive in src and moves it to dst
// (BLMOVE). go-redis' typed BLMove only takes whole seconds; the fraction is
// sent raw, within the client's ordinary read timeout.
func (q *Queue) blockMove(ctx context.Context, src, dst string, wait time.Duration) (string, bool, error) {
	for wait > 0 {
		step := wait.Truncate(time.Second)
		var cmd *redis.StringCmd
		if step > 0 {
			cmd = q.c.BLMove(ctx, src, dst, "RIGHT", "LEFT", step)
		} else {
			step = wait
			// Round up: a timeout of 0 would block forever.
			ms := (step + time.Millisecond - 1) / time.Millisecond
			cmd = redis.NewStringCmd(ctx, "blmove", src, dst, "RIGHT", "LEFT", fmt.Sprintf("%d.%03d", ms/1000, ms%1000))
			_ = q.c.Process(ctx, cmd)
		}
		wait -= step
		v, err := cmd.Result()
		switch {
		case err == nil:
			return v, true, nil
		case !errors.Is(err, redis.Nil):
			return "", false, err
		}
	}
	return "", false, nil
}

// Pending returns instance's processing list, oldest first, without
// removing anything but members that are no id (ErrBadMember, returned with
// the ids): what a restarted instance must finish first.
func (q *Queue) Pending(ctx context.Context, channel, instance string) ([]int64, error) {
	if err := check(channel, instance); err != nil {
		return nil, fmt.Errorf("queue: pending: %w", err)
	}
	k := q.keys(channel)
	// Read in pages of maxPerCall from the oldest end, each one LRANGE, so
	// no one command holds Redis (or fills a reply) for the whole of a list
	// that may be long. A page counts from the oldest end, which stays put
	// while fetches push at the newest; an ack between pages can make a
	// later page skip an id (it is seen at the next orphan check), never
	// read one twice.
	var vals []string
	for off := int64(0); ; off += maxPerCall {
		page, err := q.c.LRange(ctx, k.processing(instance), -(off + maxPerCall), -(off + 1)).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: pending of %s on %s: %w", instance, channel, err)
		}
		for i := len(page) - 1; i >= 0; i-- {
			vals = append(vals, page[i])
		}
		if len(page) < maxPerCall {
			break
		}
	}
	ids, err := q.keepIDs(ctx, k, instance, vals)
	if err != nil {
		return ids, fmt.Errorf("queue: pending of %s on %s: %w", instance, channel, err)
	}
	return ids, nil
}

// Ack removes ids from instance's processing list and from the queue for
// good; call it once their terminal status is committed. Ids not in that
// list (unknown, or already handed to another instance by Reap) are left
// alone.
func (q *Queue) Ack(ctx context.Context, channel, instance string, ids []int64) error {
	if err := check(channel, instance); err != nil {
		return fmt.Errorf("queue: ack: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	k := q.keys(channel)
	if _, err := q.runChunks(ctx, scriptAck, []string{k.processing(instance), k.members()}, nil, idArgs(ids), 1); err != nil {
		return fmt.Errorf("queue: ack %d ids of %s on %s: %w", len(ids), instance, channel, err)
	}
	return nil
}

// Retry moves items from instance's processing list to the delayed set (or
// straight to ready when Due is not in the future); they stay members, so a
// push meanwhile changes nothing. Ids not in that list are left alone.
func (q *Queue) Retry(ctx context.Context, channel, instance string, items []Item) error {
	if err := check(channel, instance); err != nil {
		return fmt.Errorf("queue: retry: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	k := q.keys(channel)
	if _, err := q.runChunks(ctx, scriptRetry, []string{k.processing(instance), k.ready(), k.delayed()}, nil, itemArgs(items, time.Now()), 2); err != nil {
		return fmt.Errorf("queue: retry %d ids of %s on %s: %w", len(items), instance, channel, err)
	}
	return nil
}

// Dead moves ids from instance's processing list to the dead list and out of
// the queue; call it once FAILED is committed. Ids not in that list are left
// alone.
func (q *Queue) Dead(ctx context.Context, channel, instance string, ids []int64) error {
	return q.dead(ctx, scriptDead, nil, channel, instance, ids)
}

// DeadOnce is Dead for ids whose dead-letter step may have happened already
// (a FAILED row met again by a claim): an id already on the dead list is only
// taken out of the processing list, not listed twice. "Already on the dead
// list" means among its newest deadOnceWindow: what DeadOnce reads is
// bounded by that, not by the list's length (scriptDeadOnce says why that
// is enough).
func (q *Queue) DeadOnce(ctx context.Context, channel, instance string, ids []int64) error {
	return q.dead(ctx, scriptDeadOnce, []any{deadOnceWindow}, channel, instance, ids)
}

// deadOnceWindow is how many of the dead list's newest ids DeadOnce checks.
const deadOnceWindow = 2 * maxPerCall

// dead runs a dead-letter script (KEYS processing, members, dead; ARGV head,
// then ids).
func (q *Queue) dead(ctx context.Context, script *redis.Script, head []any, channel, instance string, ids []int64) error {
	if err := check(channel, instance); err != nil {
		return fmt.Errorf("queue: dead: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	k := q.keys(channel)
	if _, err := q.runChunks(ctx, script, []string{k.processing(instance), k.members(), k.dead()}, head, idArgs(ids), 1); err != nil {
		return fmt.Errorf("queue: dead-letter %d ids of %s on %s: %w", len(ids), instance, channel, err)
	}
	return nil
}

// Promote moves up to max delayed ids due at or before now to ready, earliest
// first, then (within max) any delayed past what a due this package writes
// can be (MaxDelay, with a day's slack): a corrupt score, +inf or days
// ahead, that would never come due; the claim defers such an id again if
// Postgres says it is not due. Returns how many moved.
func (q *Queue) Promote(ctx context.Context, channel string, now time.Time, max int) (int, error) {
	if err := checkChannel(channel); err != nil {
		return 0, fmt.Errorf("queue: promote: %w", err)
	}
	if max < 1 {
		return 0, fmt.Errorf("queue: promote on %s: max must be at least 1, got %d", channel, max)
	}
	k := q.keys(channel)
	n, err := q.eval(ctx, scriptPromote, []string{k.delayed(), k.ready()}, unixMs(now), max, delayHorizon(now)).Int()
	if err != nil {
		return 0, fmt.Errorf("queue: promote on %s: %w", channel, err)
	}
	return n, nil
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("queue holds %q, which is not a notification id", s)
	}
	return id, nil
}

func parseStrings(vals []string) ([]int64, error) {
	ids := make([]int64, len(vals))
	for i, v := range vals {
		id, err := parseID(v)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// parseIDs reads a script's array-of-ids reply.
func parseIDs(res any) ([]int64, error) {
	vals, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected script reply %T", res)
	}
	ids := make([]int64, len(vals))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected id %v (%T) in script reply", v, v)
		}
		id, err := parseID(s)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}
