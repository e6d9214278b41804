package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Raw is the baseline: what the sink takes from plain HTTP POSTs. It runs
// twice, just before and just after the burst, so that a neighbour's load
// that comes or goes during the run weighs on both sides of the ratio; the
// figures are over both runs.
type Raw struct {
	Requests    int      `json:"requests"`
	Concurrency int      `json:"concurrency"`
	Bytes       int      `json:"body_bytes"`
	Seconds     float64  `json:"seconds"`
	Throughput  float64  `json:"throughput_per_s"`
	Latency     Dist     `json:"request_latency"`
	Errors      int      `json:"errors"`
	CPU         CPUUsage `json:"cpu"`
	Runs        []RawRun `json:"runs"`
}

// RawRun is one of the baseline's runs.
type RawRun struct {
	When       string  `json:"when"` // before or after the burst
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput_per_s"`
}

// addRaw folds one run into the combined baseline.
func addRaw(total *Raw, lat *[]time.Duration, when string, r Raw, l []time.Duration) {
	total.Requests += r.Requests
	total.Concurrency, total.Bytes = r.Concurrency, r.Bytes
	total.Seconds += r.Seconds
	total.Errors += r.Errors
	total.CPU = total.CPU.add(r.CPU)
	total.Runs = append(total.Runs, RawRun{When: when, Seconds: r.Seconds, Throughput: r.Throughput})
	if total.Seconds > 0 {
		total.Throughput = float64(total.Requests) / total.Seconds
	}
	*lat = append(*lat, l...)
	slices.Sort(*lat)
	total.Latency = distOf(*lat)
}

// envelope is the body the webhook plugin would POST for notification id:
// the same fields, in the same form, so the baseline moves as many bytes.
func envelope(id int64, recipient string, created time.Time) []byte {
	b := make([]byte, 0, 128+len(payload))
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"channel":"`+Channel+`","recipient":"`...)
	b = append(b, recipient...)
	b = append(b, `","payload":`...)
	b = append(b, payload...)
	b = append(b, `,"attempt":1,"created_at":"`...)
	b = created.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// raw POSTs N envelopes to the sink from Concurrency goroutines over a
// keep-alive Transport tuned like the webhook plugin's, with the same
// headers the plugin sends.
func (e *env) raw(ctx context.Context) (Raw, []time.Duration, error) {
	n, c := e.o.N, e.o.Concurrency
	if e.o.Provider == ProviderAlimtalk {
		// An AlimTalk channel's concurrency counts messages waiting for
		// Kakao's delivery result, not connections: the baseline keeps the
		// webhook's.
		c = min(c, DefaultConcurrency)
	}
	r := Raw{Requests: n, Concurrency: c}
	e.sink.Reset()
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * c,
		MaxIdleConnsPerHost: c,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	target := e.sink.URL() + RawPath
	// Postgres keeps microseconds, so the plugin's created_at has six digits.
	created := time.Now().Truncate(time.Microsecond)
	r.Bytes = len(envelope(int64(n), recipient(n-1), created))

	e.progress("raw baseline: %d POSTs of %d bytes at concurrency %d", n, r.Bytes, c)
	var (
		next   atomic.Int64
		errs   atomic.Int64
		mu     sync.Mutex
		lat    = make([]time.Duration, 0, n)
		wg     sync.WaitGroup
		first  error
		errMu  sync.Mutex
		userAg = []string{"notifyd-bench"}
		ctype  = []string{"application/json"}
	)
	cpu0 := e.sampleCPU(ctx)
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n/c+1)
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				// The same ids and recipients as the burst's notifications,
				// so the bodies have the same sizes.
				body := envelope(i+1, recipient(int(i)), created)
				id := "raw-" + strconv.FormatInt(i, 10)
				ts := strconv.FormatInt(time.Now().Unix(), 10)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
				if err != nil {
					errs.Add(1)
					continue
				}
				req.Header = http.Header{
					"Content-Type": ctype, "User-Agent": userAg,
					"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Idempotency-Key": {id},
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("sink answered %s", resp.Status)
					}
				}
				if err != nil {
					errs.Add(1)
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					continue
				}
				mine = append(mine, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.CPU = e.sampleCPU(ctx).since(cpu0)
	if err := ctx.Err(); err != nil {
		return r, nil, err
	}
	r.Seconds = elapsed.Seconds()
	r.Errors = int(errs.Load())
	if r.Errors > 0 {
		return r, nil, fmt.Errorf("bench: raw baseline: %d of %d POSTs failed, the first: %w", r.Errors, n, first)
	}
	if got := e.sink.Counts().Raw; got != n {
		return r, nil, fmt.Errorf("bench: raw baseline: the sink counted %d POSTs, want %d", got, n)
	}
	r.Throughput = float64(n) / elapsed.Seconds()
	slices.Sort(lat)
	r.Latency = distOf(lat)
	return r, lat, nil
}
