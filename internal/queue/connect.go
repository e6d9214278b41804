package queue

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/notifyd/notifyd/sdk"
)

// Connect opens a client from the redis config: url (redis:// or rediss://,
// with credentials, database and TLS as the URL says) or, for Redis Cluster,
// clusterAddrs (host:port, or redis:// / rediss:// URLs whose credentials and
// TLS apply to every node). Exactly one of the two must be given. poolSize
// 0 keeps go-redis' default. It does not dial: the first command does.
func Connect(url string, clusterAddrs []string, poolSize int) (redis.UniversalClient, error) {
	switch {
	case url == "" && len(clusterAddrs) == 0:
		return nil, errors.New("queue: connect: give redis.url or redis.cluster_addrs")
	case url != "" && len(clusterAddrs) > 0:
		return nil, errors.New("queue: connect: give either redis.url or redis.cluster_addrs, not both")
	case poolSize < 0:
		return nil, fmt.Errorf("queue: connect: pool size must not be negative, got %d", poolSize)
	}
	if url != "" {
		opts, err := parseURL(url)
		if err != nil {
			return nil, fmt.Errorf("queue: connect: redis.url: %w", err)
		}
		opts.PoolSize = poolSize
		return redis.NewClient(opts), nil
	}
	copts := &redis.ClusterOptions{PoolSize: poolSize}
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
