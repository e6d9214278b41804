package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/notifyd/notifyd/sdk"
)

// benchSink is the fastest receiver httptest allows: read the body, 204.
func benchSink(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkSender_Send is one signed webhook POST per op from many
// goroutines, as the SDK fans out a batch. Compare with BenchmarkRawPost:
// the gap is what the plugin adds over a bare HTTP post.
func BenchmarkSender_Send(b *testing.B) {
	for _, signed := range []bool{false, true} {
		name := "unsigned"
		cfg := map[string]any{}
		if signed {
			name = "signed"
			cfg["secret"] = testSecret
		}
		b.Run(name, func(b *testing.B) {
			srv := benchSink(b)
			cfg["url"] = srv.URL + "/hook"
			s := configure(b, &provider{}, cfg)
			m := testMessage()
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if v := s.Send(ctx, m); v.Outcome != sdk.OutcomeSuccess {
						b.Errorf("outcome = %v (%s)", v.Outcome, v.Detail)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRawPost is the baseline: a plain POST of a same-sized body to the
// same sink, with fasthttp's client (what Send uses) and with net/http's.
func BenchmarkRawPost(b *testing.B) {
	m := testMessage()
	body, _ := appendEnvelope(nil, &m)
	b.Run("fasthttp", func(b *testing.B) {
		srv := benchSink(b)
		client := &fasthttp.Client{MaxConnsPerHost: maxConnsPerHost, MaxConnWaitTimeout: time.Minute}
		b.SetParallelism(16)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for pb.Next() {
				req.Reset()
				req.SetRequestURI(srv.URL + "/hook")
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetContentType("application/json")
				req.SetBodyRaw(body)
				if err := client.DoTimeout(req, resp, 10*time.Second); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("net/http", func(b *testing.B) {
		srv := benchSink(b)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxConnsPerHost, IdleConnTimeout: 90 * time.Second}}
		b.SetParallelism(16)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := client.Post(srv.URL+"/hook", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	})
}

// BenchmarkAppendEnvelope and BenchmarkSender_sign isolate the per-message
// CPU work from the network.
func BenchmarkAppendEnvelope(b *testing.B) {
	m := testMessage()
	buf := make([]byte, 0, envelopeSize(&m))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = appendEnvelope(buf[:0], &m)
	}
}

func BenchmarkSender_sign(b *testing.B) {
	key, _ := decodeSecret(testSecret)
	s := &sender{macs: []*sync.Pool{newMACPool(key)}}
	m := testMessage()
	body, _ := appendEnvelope(nil, &m)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.sign("order-42-shipped", "1740816000", body)
	}
}

// BenchmarkStatusScan: what reading an answer's status line for a 000 costs
// a send (replayConn.Read), on a receiver's usual first read.
func BenchmarkStatusScan(b *testing.B) {
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nDate: Fri, 27 Nov 2026 08:00:00 GMT\r\n\r\n")
	for b.Loop() {
		var s statusScan
		if s.scan(answer) >= 0 {
			b.Fatal("found a 000")
		}
	}
}
