package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/wire"
)

// sendEach is providerclient's SendEach: the verdicts by message, how many
// answers carried them, and how many times each message was answered.
func sendEach(t *testing.T, ctx context.Context, c interface {
	SendEach(context.Context, []sdk.Message, func([]int, []sdk.Verdict)) error
}, ms []sdk.Message, each func(answered int)) (vs []sdk.Verdict, answers int, times []int) {
	t.Helper()
	vs, times = make([]sdk.Verdict, len(ms)), make([]int, len(ms))
	answered := 0
	err := c.SendEach(ctx, ms, func(idx []int, got []sdk.Verdict) {
		answers++
		for k, i := range idx {
			vs[i] = got[k]
			times[i]++
		}
		answered += len(idx)
		if each != nil {
			each(answered)
		}
	})
	if err != nil {
		t.Fatalf("SendEach: %v", err)
	}
	return vs, answers, times
}

// SendStream answers each verdict as it is known: the messages its provider
// answers at once reach the host while one it holds is still running, and
// the held one follows; each message is answered once. A call whose
// messages all answer at once is one answer, as Send's.
func TestServe_SendStream(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	c := serve(t, &fixture{info: sdk.Info{Name: "slow"}, configure: senderFor(sdk.SenderFunc(
		func(ctx context.Context, m sdk.Message) sdk.Verdict {
			if m.ID == 3 {
				select {
				case <-release:
				case <-ctx.Done():
					return sdk.Transient(ctx.Err().Error())
				}
			}
			return sdk.Success(json.RawMessage(fmt.Sprintf(`{"id":%d}`, m.ID)))
		}))})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms := messages(8, time.Now().Add(time.Minute))
	var released atomic.Bool
	vs, _, times := sendEach(t, ctx, c, ms, func(answered int) {
		if answered == len(ms)-1 && released.CompareAndSwap(false, true) {
			close(release) // the other seven are in while message 3 is held
		}
	})
	if !released.Load() {
		t.Fatal("the held message's batch-mates were not answered before it")
	}
	for i, v := range vs {
		if want := fmt.Sprintf(`{"id":%d}`, i+1); v.Outcome != sdk.OutcomeSuccess || string(v.Result) != want || times[i] != 1 {
			t.Errorf("message %d: %v %s, answered %d times; want SUCCESS %s once", i, v.Outcome, v.Result, times[i], want)
		}
	}

	t.Run("all at once, one answer", func(t *testing.T) {
		c := serve(t, &fixture{info: sdk.Info{Name: "fast"}, configure: senderFor(sdk.SenderFunc(
			func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }))})
		_, answers, _ := sendEach(t, ctx, c, messages(64, time.Now().Add(time.Minute)), nil)
		// One, but on a loaded machine a few verdicts may come just past
		// the linger; never one an answer.
		if answers > 8 {
			t.Errorf("64 messages answered at once came in %d answers, want one", answers)
		}
	})
}

// A stream's answers are as many as its verdicts need, but its results are
// held to the protocol's bound in all, as Send's one answer is: results past
// it are notes, every outcome kept (TestServe_AnswerWithinProtocolBound's
// 20 results of 4 MiB, streamed).
func TestServe_SendStream_ResultsWithinProtocolBound(t *testing.T) {
	t.Parallel()
	result := json.RawMessage(`"` + strings.Repeat("e", wire.MaxResultBytes-2) + `"`)
	c := serve(t, &fixture{info: sdk.Info{Name: "embed"}, configure: senderFor(sdk.SenderFunc(
		func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(result) }))})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vs, _, _ := sendEach(t, ctx, c, messages(20, time.Now().Add(time.Minute)), nil)
	total, kept := 0, 0
	for i, v := range vs {
		if v.Outcome != sdk.OutcomeSuccess || !json.Valid(v.Result) {
			t.Errorf("verdict %d: %v %q (result %.80q), want SUCCESS with JSON", i, v.Outcome, v.Detail, v.Result)
		}
		total += len(v.Result)
		if len(v.Result) == len(result) {
			kept++
		}
	}
	if total > providerv1.MaxMessageBytes+20*512 {
		t.Errorf("results total %d bytes, past the protocol's %d", total, providerv1.MaxMessageBytes)
	}
	if kept == 0 || kept == 20 {
		t.Errorf("%d of 20 results kept, want those that fit", kept)
	}
}
