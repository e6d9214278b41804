package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/sdk"
)

// Connect opens a client from the redis config: url (redis:// or rediss://,
// with credentials, database and TLS as the URL says) or, for Redis Cluster,
// clusterAddrs (host:port, or redis:// / rediss:// URLs whose credentials and
// TLS apply to every node). Exactly one of the two must be given. poolSize
// 0 keeps go-redis' default. It does not dial: the first command does.
//
// Every connection it opens first reads the server's maxmemory-policy, and
// fails with an *EvictionError (ErrEvicting) unless it is noeviction: a
// Redis that evicts can drop a queue's key, and the notifications whose
// ids it held would stay QUEUED for good (EvictionError). A server whose
// policy cannot be read is used; OnPolicyUnchecked hears of it once.
func Connect(url string, clusterAddrs []string, poolSize int, options ...ConnectOption) (redis.UniversalClient, error) {
	switch {
	case url == "" && len(clusterAddrs) == 0:
		return nil, errors.New("queue: connect: give redis.url or redis.cluster_addrs")
	case url != "" && len(clusterAddrs) > 0:
		return nil, errors.New("queue: connect: give either redis.url or redis.cluster_addrs, not both")
	case poolSize < 0:
		return nil, fmt.Errorf("queue: connect: pool size must not be negative, got %d", poolSize)
	}
	chk := &evictionCheck{}
	for _, o := range options {
		o(chk)
	}
	if url != "" {
		o, err := parseURL(url)
		if err != nil {
			return nil, fmt.Errorf("queue: connect: redis.url: %w", err)
		}
		o.PoolSize = poolSize
		o.OnConnect = chk.onConnect(o.Addr)
		return redis.NewClient(o), nil
	}
	copts := &redis.ClusterOptions{PoolSize: poolSize}
	// Each node's client checks its own server: on a cluster a shard
	// configured apart (or replaced) may evict while the others do not.
	copts.NewClient = func(o *redis.Options) *redis.Client {
		o.OnConnect = chk.onConnect(o.Addr)
		return redis.NewClient(o)
	}
	for i, addr := range clusterAddrs {
		if !strings.Contains(addr, "://") {
			if !strings.Contains(addr, ":") {
				return nil, fmt.Errorf("queue: connect: redis.cluster_addrs[%d] = %q is not host:port", i, addr)
			}
			copts.Addrs = append(copts.Addrs, addr)
			continue
		}
		opts, err := parseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("queue: connect: redis.cluster_addrs[%d]: %w", i, err)
		}
		copts.Addrs = append(copts.Addrs, opts.Addr)
		if copts.Username == "" && copts.Password == "" {
			copts.Username, copts.Password = opts.Username, opts.Password
		}
		if copts.TLSConfig == nil {
			copts.TLSConfig = opts.TLSConfig
		}
	}
	return redis.NewClusterClient(copts), nil
}

// parseURL parses a redis:// or rediss:// URL without echoing it, since it
// may carry a password.
func parseURL(raw string) (*redis.Options, error) {
	if !strings.HasPrefix(raw, "redis://") && !strings.HasPrefix(raw, "rediss://") {
		return nil, errors.New("must start with redis:// or rediss://")
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid Redis URL: %s", redactErr(err, raw))
	}
	return opts, nil
}

// redactErr keeps a parse error's reason but never the URL's password or
// query values.
func redactErr(err error, raw string) string {
	msg := err.Error()
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				if pw := rest[colon+1 : at]; pw != "" {
					msg = strings.ReplaceAll(msg, pw, "xxxxx")
				}
			}
		}
	}
	return sdk.RedactURLs(msg)
}

// ConnectOption is an option of Connect.
type ConnectOption func(*evictionCheck)

// OnPolicyUnchecked has f told, once per server address, that a server's
// maxmemory-policy could not be read (INFO and CONFIG GET both refused, as
// a managed Redis or an ACL may): the connection is used all the same, and
// f should say that the policy must be noeviction.
func OnPolicyUnchecked(f func(addr string, why error)) ConnectOption {
	return func(c *evictionCheck) { c.unchecked = f }
}

// ErrEvicting is wrapped by the error of a connection to a Redis whose
// maxmemory-policy may evict notifyd's keys (an *EvictionError).
var ErrEvicting = errors.New("Redis may evict notifyd's keys")

// EvictionError is a Redis whose maxmemory-policy is not noeviction. Under
// allkeys-* any key may go when Redis is full: a queue's ready list, its
// delayed set or a processing list, whose ids then stay in the members set
// and are skipped by every later push, so their rows stay QUEUED for good.
// Under volatile-* the keys with a TTL go: notifyd's rate limit buckets,
// daily caps and breaker probes (a limit forgotten) and a dead-list
// filter's drop hash. With noeviction a full Redis refuses the write
// instead, which notifyd retries from Postgres.
type EvictionError struct {
	Addr   string
	Policy string // as the server answered, quoted if it is not a plain word, at most 64 bytes
}

func (e *EvictionError) Error() string {
	return fmt.Sprintf("Redis at %s evicts keys when it is full (maxmemory-policy %s), which can drop a queue and leave its notifications QUEUED for good: set maxmemory-policy noeviction on it",
		e.Addr, e.Policy)
}

// Is makes errors.Is(err, ErrEvicting) hold.
func (e *EvictionError) Is(target error) bool { return target == ErrEvicting }

// evictionCheck is one client's check of its servers' maxmemory-policy.
type evictionCheck struct {
	unchecked func(addr string, why error)
	told      sync.Map // addr -> struct{}: servers whose policy could not be read, said once
}

// onConnect is the OnConnect hook of the client of the server at addr. It
// costs one INFO a connection (connections are pooled: a few at start and
// when the pool grows), so a policy changed at run time, or a server
// restarted with another configuration, is seen by the next connection.
func (c *evictionCheck) onConnect(addr string) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		policy, err := evictionPolicy(ctx, cn)
		var re redis.Error
		switch {
		case errors.As(err, &re):
			// Refused (unknown command, NOPERM): not checked, used.
			if _, seen := c.told.LoadOrStore(addr, struct{}{}); !seen && c.unchecked != nil {
				c.unchecked(addr, err)
			}
			return nil
		case err != nil:
			return err // the connection itself failed
		case policy == "noeviction":
			return nil
		}
		return &EvictionError{Addr: addr, Policy: shownPolicy(policy)}
	}
}

// evictionPolicy reads the server's maxmemory-policy: from INFO memory
// (CONFIG is often disabled on a managed Redis), else from CONFIG GET. The
// error is INFO's when neither answers it, a redis.Error when the server
// refused both.
func evictionPolicy(ctx context.Context, cn *redis.Conn) (string, error) {
	info, ierr := cn.Info(ctx, "memory").Result()
	if ierr == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(line, "maxmemory_policy:"); ok {
				return strings.TrimSpace(v), nil
			}
		}
	} else if !isRedisError(ierr) {
		return "", ierr
	}
	cfg, cerr := cn.ConfigGet(ctx, "maxmemory-policy").Result()
	if cerr == nil {
		if v, ok := cfg["maxmemory-policy"]; ok {
			return v, nil
		}
		cerr = noPolicy("CONFIG GET maxmemory-policy answered no value")
	}
	if !isRedisError(cerr) {
		return "", cerr
	}
	if ierr == nil {
		ierr = noPolicy("INFO memory has no maxmemory_policy")
	}
	return "", fmt.Errorf("%w; CONFIG GET: %w", ierr, cerr)
}

// noPolicy is a server's answer that holds no policy: a refusal as good as
// the server's own (redis.Error), so the connection is used unchecked.
type noPolicy string

func (e noPolicy) Error() string { return string(e) }
func (noPolicy) RedisError()     {}

func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// shownPolicy is a policy as an error shows it: a plain word as it is,
// anything else quoted, and at most 64 bytes of it (it is the server's
// answer).
func shownPolicy(p string) string {
	if len(p) > 64 {
		p = p[:64]
	}
	if p == "" || strings.IndexFunc(p, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return strconv.Quote(p)
	}
	return p
}
