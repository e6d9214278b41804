// Package providerclient is the host side of protocol notifyd.provider.v1:
// it speaks gRPC to a provider plugin in sdk types. internal/pluginhost (the
// supervised host) and sdk/sdktest (the conformance kit) use it; plugin
// authors never need it.
package providerclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/wire"
)

// DetailProcessExited begins the detail of every verdict a host gives a
// message whose plugin process died during its call: the outcome is unknown
// (the provider may have taken it), and the process's death may have been
// the message's doing. notifyd's engine treats such a message as in flight
// in a crash (docs/design.md §10): sent alone later, quarantined if it keeps
// killing its sender. Only the host says it: a plugin's own detail that
// begins so is read as pluginSaid + detail (fromProto), so no plugin can
// have a message it answered sent again, or quarantined, by its words.
const DetailProcessExited = "plugin exited, outcome unknown"

// pluginSaid begins a plugin's detail that would otherwise read as the
// host's own DetailProcessExited.
const pluginSaid = "plugin said: "

// Client calls one plugin process.
type Client struct {
	rpc providerv1.ProviderClient
	// unary: the plugin answered SendStream UNIMPLEMENTED (built before it,
	// or not on the SDK), so SendEach calls Send.
	unary atomic.Bool
}

// New wraps a gRPC client of the provider service.
func New(rpc providerv1.ProviderClient) *Client { return &Client{rpc: rpc} }

// ConfigError is a channel config the plugin rejected; Message is the
// plugin's own words, for the operator.
type ConfigError struct {
	Channel string
	Message string
}

// Error names the channel and the plugin's reason for refusing its config.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("channel %s: config rejected: %s", e.Channel, e.Message)
}

// Describe asks the plugin who it is.
func (c *Client) Describe(ctx context.Context) (sdk.Info, error) {
	r, err := c.rpc.Describe(ctx, &providerv1.DescribeRequest{}, answerBound)
	if err != nil {
		return sdk.Info{}, fmt.Errorf("describe: %w", err)
	}
	caps := r.Capabilities[:min(len(r.Capabilities), MaxCapabilities)]
	for i := range caps {
		caps[i] = describeText(caps[i])
	}
	return sdk.Info{
		Name:           describeText(r.Name),
		Version:        describeText(r.Version),
		Capabilities:   caps,
		ConfigSchema:   json.RawMessage(r.ConfigSchema),
		MaxConcurrency: int(r.MaxConcurrency),
	}, nil
}

// Bounds of what a plugin says of itself (Describe), as the host keeps it
// for the plugin's life and shows it (the log, the dashboard, `notifyd
// plugins list`): every other text a plugin answers was cut at the wire,
// while a 512 KiB name and version, OSC 52 and all, were kept whole.
const (
	// MaxDescribeText bounds the name, the version and each capability,
	// after their terminal controls are escaped (wire.EscapeControls).
	MaxDescribeText = 256
	// MaxCapabilities bounds the capabilities kept.
	MaxCapabilities = 64
)

func describeText(s string) string {
	return sdk.CutText(wire.EscapeControls(s[:min(len(s), 4*MaxDescribeText)]), MaxDescribeText)
}

// MaxAnswerBytes bounds a plugin's answer to every call but Send (Describe,
// Configure, Health, Callback), whose largest is well under it (1,000
// callback updates within the SDK's bounds are 1.3 MB); a Send answer may
// carry results up to the protocol's message bound. Each of those answers
// was read and decoded up to 64 MiB before the host cut its texts to a few
// KiB — a provider health check answered that way on every /readyz probe,
// which needs no token.
const MaxAnswerBytes = 2 << 20

// answerBound is the call option that holds a call to MaxAnswerBytes.
var answerBound = grpc.MaxCallRecvMsgSize(MaxAnswerBytes)

// Configure sends one channel's config. A rejection is a *ConfigError; any
// other error means the call itself failed.
func (c *Client) Configure(ctx context.Context, channel string, cfg json.RawMessage) error {
	_, err := c.ConfigureChannel(ctx, channel, cfg)
	return err
}

// Configured is what the plugin says of a channel it accepted.
type Configured struct {
	// Batches: the channel's Sender is an sdk.BatchSender, so one Send call
	// carries the whole batch to it (the host counts such a channel's
	// concurrency in calls, not messages).
	Batches bool
}

// ConfigureChannel is Configure, also returning what the plugin says of the
// accepted channel.
func (c *Client) ConfigureChannel(ctx context.Context, channel string, cfg json.RawMessage) (Configured, error) {
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	r, err := c.rpc.Configure(ctx, &providerv1.ConfigureRequest{Channel: channel, Config: cfg}, answerBound)
	if err != nil {
		return Configured{}, fmt.Errorf("configure channel %s: %w", channel, err)
	}
	if r.Error != "" {
		return Configured{}, &ConfigError{Channel: channel, Message: sdk.CutText(r.Error, sdk.MaxConfigError)}
	}
	return Configured{Batches: r.Batches}, nil
}

// Send delivers a batch and returns exactly one verdict per message, or an
// error when the call failed or the plugin broke the contract (wrong verdict
// count): the caller decides what an unknown outcome means.
func (c *Client) Send(ctx context.Context, ms []sdk.Message) ([]sdk.Verdict, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	r, err := c.rpc.Send(ctx, sendRequest(ms))
	if err != nil {
		return nil, fmt.Errorf("send %d messages: %w", len(ms), err)
	}
	if len(r.Verdicts) != len(ms) {
		return nil, fmt.Errorf("send %d messages: plugin returned %d verdicts", len(ms), len(r.Verdicts))
	}
	vs := make([]sdk.Verdict, len(ms))
	for i, v := range r.Verdicts {
		vs[i] = fromProto(v)
	}
	return vs, nil
}

// SendEach delivers a batch and hands got each message's verdict as the
// plugin answers it (SendStream): idx are indexes into ms, each given once,
// on the caller's goroutine. A message its provider holds until its deadline
// then holds back neither the others' verdicts nor what the caller keeps
// for them. A plugin that does not serve SendStream is sent Send instead,
// and got is called once. The error says the call failed or the plugin broke
// the contract — an index it was not asked for, a message answered twice,
// messages left without a verdict — and the messages got was not called for
// have an unknown outcome.
//
// A call's results are held to the protocol's message bound in all, as
// Send's answer is (gRPC holds it to that), and each to what the outbox
// stores: a plugin streaming result after result of that size made the host
// hold each until its verdict was stored. Past either, a result is replaced
// by a note saying so (its message was delivered: a lost result is a note,
// a message sent twice cannot be taken back).
func (c *Client) SendEach(ctx context.Context, ms []sdk.Message, got func(idx []int, vs []sdk.Verdict)) error {
	if len(ms) == 0 {
		return nil
	}
	if c.unary.Load() {
		return c.sendUnary(ctx, ms, got)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when the plugin broke the contract
	st, err := c.rpc.SendStream(ctx, sendRequest(ms))
	if err != nil {
		return fmt.Errorf("send %d messages: %w", len(ms), boundError(err))
	}
	seen := make([]bool, len(ms))
	answered, budget := 0, providerv1.MaxMessageBytes
	for {
		p, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if status.Code(err) == codes.Unimplemented && answered == 0 {
			c.unary.Store(true)
			return c.sendUnary(ctx, ms, got)
		}
		if err != nil {
			return fmt.Errorf("send %d messages: %d answered, then: %w", len(ms), answered, boundError(err))
		}
		if len(p.Verdicts) == 0 {
			// The SDK never sends one: each answer carries a verdict it had
			// not sent, so a call has at most len(ms) answers.
			return fmt.Errorf("send %d messages: the plugin answered no verdict in an answer", len(ms))
		}
		idx := make([]int, 0, len(p.Verdicts))
		vs := make([]sdk.Verdict, 0, len(p.Verdicts))
		var broke error
		for _, iv := range p.Verdicts {
			i := int(iv.GetIndex())
			switch {
			case i < 0 || i >= len(ms):
				broke = fmt.Errorf("send %d messages: the plugin answered message %d, which it was not sent", len(ms), iv.GetIndex())
				continue
			case seen[i]:
				broke = fmt.Errorf("send %d messages: the plugin answered message %d (id %d) twice", len(ms), i, ms[i].ID)
				continue
			}
			seen[i] = true
			v := fromProto(iv.GetVerdict())
			if len(v.Result) > budget {
				v.Result = unfitNote(len(v.Result))
			}
			budget = max(0, budget-len(v.Result))
			idx, vs = append(idx, i), append(vs, v)
		}
		answered += len(idx)
		if len(idx) > 0 {
			got(idx, vs)
		}
		if broke != nil {
			return broke
		}
		if answered == len(ms) {
			// Every message answered: whatever the plugin does with the
			// stream from now on holds nothing of the caller's.
			return nil
		}
	}
	if answered < len(ms) {
		return fmt.Errorf("send %d messages: the plugin answered %d of them", len(ms), answered)
	}
	return nil
}

// sendUnary is SendEach by Send, for a plugin that does not serve
// SendStream.
func (c *Client) sendUnary(ctx context.Context, ms []sdk.Message, got func(idx []int, vs []sdk.Verdict)) error {
	vs, err := c.Send(ctx, ms)
	if err != nil {
		return err
	}
	idx := make([]int, len(vs))
	for i := range idx {
		idx[i] = i
	}
	got(idx, vs)
	return nil
}

// Health checks that the process answers (err) and returns the channels whose
// provider reports a problem, by channel.
func (c *Client) Health(ctx context.Context) (unhealthy map[string]string, err error) {
	r, err := c.rpc.Health(ctx, &providerv1.HealthRequest{}, answerBound)
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	for _, ch := range r.Channels {
		if ch.Error != "" && len(unhealthy) < maxHealthChannels {
			if unhealthy == nil {
				unhealthy = map[string]string{}
			}
			unhealthy[sdk.CutText(ch.Channel, wire.MaxChannelLen)] = sdk.CutText(ch.Error, sdk.MaxHealthError)
		}
	}
	return unhealthy, nil
}

// Alive checks only that the process answers, without the providers' own
// health checks: a slow provider must not get a healthy process restarted.
func (c *Client) Alive(ctx context.Context) error {
	if _, err := c.rpc.Health(ctx, &providerv1.HealthRequest{LivenessOnly: true}, answerBound); err != nil {
		return fmt.Errorf("health: %w", err)
	}
	return nil
}

// HealthError folds Health's per-channel problems into one error, or nil.
func HealthError(unhealthy map[string]string) error {
	if len(unhealthy) == 0 {
		return nil
	}
	chs := make([]string, 0, len(unhealthy))
	for ch := range unhealthy {
		chs = append(chs, ch)
	}
	sort.Strings(chs)
	parts := make([]string, len(chs))
	for i, ch := range chs {
		parts[i] = fmt.Sprintf("channel %s: %s", ch, unhealthy[ch])
	}
	return errors.New(strings.Join(parts, "; "))
}

// sendRequest is ms on the wire, in one block: one allocation a batch.
func sendRequest(ms []sdk.Message) *providerv1.SendRequest {
	wire := make([]providerv1.Message, len(ms))
	req := &providerv1.SendRequest{Messages: make([]*providerv1.Message, len(ms))}
	for i := range ms {
		toProto(&wire[i], &ms[i])
		req.Messages[i] = &wire[i]
	}
	return req
}

func toProto(w *providerv1.Message, m *sdk.Message) {
	w.Id = m.ID
	w.Channel = m.Channel
	w.Recipient = m.Recipient
	w.Payload = m.Payload
	w.Attempt = int32(m.Attempt)
	w.IdempotencyKey = m.IdempotencyKey
	w.TraceParent = m.TraceParent
	// Outside what Unix nanoseconds hold (a created_at of an application's
	// SQL), no time rather than a wrapped-around one.
	w.CreatedAtUnixNano = wire.UnixNano(m.CreatedAt)
	w.DeadlineUnixNano = wire.UnixNano(m.Deadline)
}

// fromProto checks what the SDK already checks, since a plugin need not be
// built with this SDK: an outcome the host does not know is TRANSIENT, and
// the detail and provider code are cut to what the outbox stores
// (wire.MaxErrorLen, wire.MaxProviderCodeLen) here at the wire, so a plugin
// answering megabytes of them costs the engine no more than that on the way
// to the settle (the protocol's message bound is 64 MB a call); a result
// past what the outbox stores (wire.MaxResultBytes) is the outbox's note of
// its size already.
func fromProto(v *providerv1.Verdict) sdk.Verdict {
	if v == nil {
		return sdk.Transient(sdk.DetailInvalidVerdict + " (none)")
	}
	out := sdk.Verdict{
		Outcome:        sdk.Outcome(v.Outcome),
		RetryAfter:     time.Duration(v.RetryAfterMs) * time.Millisecond,
		ProviderStatus: int(v.ProviderStatus),
		ProviderCode:   wire.Truncate(v.ProviderCode, wire.MaxProviderCodeLen),
		Detail:         wire.Truncate(v.Detail, wire.MaxErrorLen-len(pluginSaid)),
		Result:         json.RawMessage(v.Result),
	}
	if strings.HasPrefix(out.Detail, DetailProcessExited) {
		out.Detail = pluginSaid + out.Detail
	}
	switch out.Outcome {
	case sdk.OutcomeSuccess, sdk.OutcomeTransient, sdk.OutcomePermanent:
	default:
		return sdk.Transient(fmt.Sprintf("%s (outcome %d)", sdk.DetailInvalidVerdict, v.Outcome))
	}
	if out.RetryAfter < 0 {
		out.RetryAfter = 0
	}
	if len(out.Result) == 0 {
		out.Result = nil
	}
	if len(out.Result) > wire.MaxResultBytes {
		// What the outbox would store, made here: the verdict no longer
		// holds the result on its way to the settle.
		out.Result = wire.OverResultNote(len(out.Result))
	}
	return out
}

// unfitNote stands for a result of n bytes past what is left of its call's
// result bytes (SendEach).
func unfitNote(n int) []byte {
	return fmt.Appendf(nil, `{"notifyd_error":"the provider's result was %d bytes; with the other results of its call it did not fit the %d bytes a call's answer may hold; not stored"}`,
		n, providerv1.MaxMessageBytes)
}

// Plugins is the go-plugin plugin set a host dispenses from, by protocol
// version; a future v2 is added beside v1.
func Plugins() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		providerv1.Version: {providerv1.PluginName: &grpcPlugin{}},
	}
}

// DialOptions lifts gRPC's 4 MB message limit to the protocol's, bounds a
// call's headers and trailers (MaxMetadataBytes), bounds the text of every
// error a plugin answers (boundErrors) and refuses go-plugin's broker stream
// (refuseBroker).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(providerv1.MaxMessageBytes),
		grpc.MaxCallSendMsgSize(providerv1.MaxMessageBytes),
	), grpc.WithMaxHeaderListSize(MaxMetadataBytes),
		grpc.WithChainUnaryInterceptor(boundErrors), grpc.WithChainStreamInterceptor(refuseBroker)}
}

// MaxMetadataBytes bounds the headers and trailers of a plugin's answer to
// one call (its gRPC metadata, the error's text among them): gRPC's own
// default is 16 MiB, decoded in full before any bound of the host's (the
// error text is cut after it), so a plugin answering every call with
// megabytes of trailers made the host allocate them per call in flight.
// A longer header block fails the call (codes.Internal).
const MaxMetadataBytes = 64 << 10

// MaxErrorText bounds the message of a gRPC error a plugin answers, as the
// host reads it: a plugin (one not built on the SDK, or its gRPC layer) may
// answer any call with an error of megabytes, which went whole into every
// message's detail, the log, /readyz and the dashboard.
const MaxErrorText = 1024

// maxHealthChannels bounds the channels one Health answer may report as
// unhealthy (a host configures far fewer).
const maxHealthChannels = 1024

// boundErrors cuts a call's error text to MaxErrorText (valid UTF-8, no
// NUL), keeping its code, for every call of the protocol at once.
func boundErrors(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return boundError(invoker(ctx, method, req, reply, cc, opts...))
}

// boundError is err with its text cut to MaxErrorText, its code kept: what
// boundErrors does for every unary call, for a stream's.
func boundError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if cut := sdk.CutText(st.Message(), MaxErrorText); cut != st.Message() {
		return status.Error(st.Code(), cut)
	}
	return err
}

// brokerStream is go-plugin's stream through which a plugin announces
// connections for the host to dial back.
const brokerStream = "/plugin.GRPCBroker/StartStream"

// refuseBroker refuses the broker stream go-plugin opens to every plugin:
// notifyd's protocol makes no connection back, and go-plugin starts a
// goroutine and a 5 s timer for each announcement a plugin sends on it — a
// plugin announcing in a loop made the host hold tens of thousands of
// goroutines and a hundred megabytes within seconds. Refused, go-plugin's
// broker ends at once.
func refuseBroker(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method == brokerStream {
		return nil, status.Error(codes.Unimplemented, "notifyd's plugin protocol uses no broker connections")
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// Dispense gets the Client from a started go-plugin client.
func Dispense(pc *plugin.Client) (*Client, error) {
	proto, err := pc.Client()
	if err != nil {
		return nil, err
	}
	raw, err := proto.Dispense(providerv1.PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense %s: %w", providerv1.PluginName, err)
	}
	c, ok := raw.(*Client)
	if !ok {
		return nil, fmt.Errorf("dispense %s: got %T", providerv1.PluginName, raw)
	}
	return c, nil
}

type grpcPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (grpcPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("providerclient: the host does not serve providers")
}

func (grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return New(providerv1.NewProviderClient(cc)), nil
}

// Config is the go-plugin client config every notifyd host uses (gRPC only,
// the handshake, protocol v1); the caller adds Cmd or Reattach, and
// StartTimeout, Stderr as it needs.
func Config(log hclog.Logger) *plugin.ClientConfig {
	return &plugin.ClientConfig{
		HandshakeConfig:  providerv1.Handshake(),
		VersionedPlugins: Plugins(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		GRPCDialOptions:  DialOptions(),
		Logger:           log,
	}
}

// Attach connects to a provider served by sdk.ServeInProcess. Kill the
// returned go-plugin client when done.
func Attach(attach *plugin.ReattachConfig, log hclog.Logger) (*plugin.Client, *Client, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cfg := Config(log)
	cfg.Reattach = attach
	// On reattach go-plugin dispenses from Plugins, not VersionedPlugins.
	cfg.Plugins = cfg.VersionedPlugins[attach.ProtocolVersion]
	if cfg.Plugins == nil {
		return nil, nil, fmt.Errorf("attach to in-process provider: protocol version %d not supported", attach.ProtocolVersion)
	}
	pc := plugin.NewClient(cfg)
	c, err := Dispense(pc)
	if err != nil {
		pc.Kill()
		return nil, nil, fmt.Errorf("attach to in-process provider: %w", err)
	}
	return pc, c, nil
}

// ErrCallbackUnsupported: the plugin does not take callbacks (it answered
// UNIMPLEMENTED: its Sender is not an sdk.CallbackHandler, or it was built
// before the Callback RPC).
var ErrCallbackUnsupported = errors.New("the plugin takes no callbacks")

// CallbackRefused is a callback the plugin could not read; Message is its
// reason, for the caller.
type CallbackRefused struct{ Message string }

// Error is the plugin's reason for refusing the callback.
func (e *CallbackRefused) Error() string { return "callback refused by the plugin: " + e.Message }

// Callback hands a provider's callback to the plugin and returns its
// updates, each held to the SDK's bounds (cut, never trusted: a plugin need
// not be built with this SDK). An answer with more than
// sdk.MaxCallbackUpdates updates, or an update with an unknown outcome, is
// an error: the plugin broke the contract.
func (c *Client) Callback(ctx context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	w := &providerv1.CallbackRequest{Channel: req.Channel, Query: req.Query.Encode(), Body: req.Body}
	names := make([]string, 0, len(req.Headers))
	for name := range req.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w.Headers = append(w.Headers, &providerv1.CallbackHeader{Name: name, Values: req.Headers[name]})
	}
	r, err := c.rpc.Callback(ctx, w, answerBound)
	if status.Code(err) == codes.Unimplemented {
		return sdk.CallbackAnswer{}, ErrCallbackUnsupported
	}
	if err != nil {
		return sdk.CallbackAnswer{}, fmt.Errorf("callback of channel %s: %w", req.Channel, err)
	}
	if r.Error != "" {
		return sdk.CallbackAnswer{}, &CallbackRefused{Message: sdk.CutText(r.Error, sdk.MaxReceiptDetail)}
	}
	if len(r.Updates) > sdk.MaxCallbackUpdates {
		return sdk.CallbackAnswer{}, fmt.Errorf("callback of channel %s: the plugin returned %d updates, over the bound of %d", req.Channel, len(r.Updates), sdk.MaxCallbackUpdates)
	}
	ans := sdk.CallbackAnswer{
		Updates:          make([]sdk.ReceiptUpdate, len(r.Updates)),
		ReplyStatus:      int(r.ReplyStatus),
		ReplyContentType: sdk.CutText(r.ReplyContentType, 200),
	}
	if len(r.ReplyBody) <= sdk.MaxReplyBody {
		ans.ReplyBody = r.ReplyBody
	}
	if ans.ReplyStatus != 0 && (ans.ReplyStatus < 200 || ans.ReplyStatus > 599) {
		return sdk.CallbackAnswer{}, fmt.Errorf("callback of channel %s: the plugin asked for reply status %d, not an HTTP status", req.Channel, ans.ReplyStatus)
	}
	for i, u := range r.Updates {
		out := sdk.ReceiptUpdate{
			NotificationID: u.NotificationId,
			Outcome:        sdk.ReceiptOutcome(u.Outcome),
			Detail:         sdk.CutText(u.Detail, sdk.MaxReceiptDetail),
			ProviderCode:   sdk.CutText(u.ProviderCode, sdk.MaxReceiptCode),
		}
		if out.Outcome != sdk.Delivered && out.Outcome != sdk.FailedAfterSend {
			return sdk.CallbackAnswer{}, fmt.Errorf("callback of channel %s: update %d (notification %d) has outcome %d, neither DELIVERED nor FAILED_AFTER_SEND",
				req.Channel, i, u.NotificationId, u.Outcome)
		}
		if u.AtUnixNano != 0 {
			out.At = time.Unix(0, u.AtUnixNano).UTC()
		}
		ans.Updates[i] = out
	}
	return ans, nil
}
