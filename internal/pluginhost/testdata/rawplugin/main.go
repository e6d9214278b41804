// Command rawplugin is a hostile test plugin (hostile_plugin_test.go). It
// speaks notifyd.provider.v1 without the SDK (a plugin need not use it);
// what it does depends on the name it is installed under
// (notifyd-plugin-<mode>):
//
//	bigerr:      every Send fails with a gRPC error whose message is 2 MiB
//	brokerflood: once served, it announces broker connections back to the
//	             host as fast as it can (go-plugin's GRPCBroker.Accept)
//	cfgerr:      Configure of a channel whose config names a "refuse" file
//	             that exists fails with a gRPC error (not a refusal)
//	bigdescribe: Describe answers a 512 KiB name and version holding
//	             terminal controls, and 20,000 capabilities
//	bigmeta:     every Send answers its verdicts with 8 MiB of trailer
//	             metadata
//	bighealth:   Health (not the liveness check) answers 40 channels with
//	             a 1 MiB error each
//	bigresult:   Send answers its one message SUCCESS with a 40 MiB result
//	manyhealth:  Health (not the liveness check) answers 2,000 channels it
//	             was never given, a 1 KiB error each
//	answerlate:  Send answers every message SUCCESS at the first message's
//	             deadline, as an SDK plugin whose one message its provider
//	             held until then answers the others (Send, not SendStream)
//
// SendStream (which any other mode leaves UNIMPLEMENTED, as a plugin built
// before it) answers message 0 SUCCESS first, then:
//
//	streamstray: a verdict for message 99, which it was not sent
//	streamtwice: message 0 again, PERMANENT
//	streamshort: nothing more: the stream ends
//	streamempty: answers without a verdict, as fast as it can
//	streamhold:  every other message SUCCESS, and the stream held open
//	streambig:   every other message SUCCESS, one answer each, with a
//	             result of the bytes its payload's "result" says
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/notifyd/notifyd/sdk/proto/providerv1"
)

var mode = strings.TrimPrefix(filepath.Base(os.Args[0]), "notifyd-plugin-")

type server struct {
	providerv1.UnimplementedProviderServer
}

func (server) Describe(context.Context, *providerv1.DescribeRequest) (*providerv1.DescribeResponse, error) {
	if mode == "bigdescribe" {
		osc := "\x1b]52;c;cm0gLXJmIH4=\x07"
		caps := make([]string, 20000)
		for i := range caps {
			caps[i] = "capability"
		}
		return &providerv1.DescribeResponse{Name: osc + strings.Repeat("n", 512<<10), Version: osc + strings.Repeat("v", 512<<10), Capabilities: caps}, nil
	}
	return &providerv1.DescribeResponse{Name: mode, Version: "0"}, nil
}

func (server) Configure(_ context.Context, req *providerv1.ConfigureRequest) (*providerv1.ConfigureResponse, error) {
	var cfg struct {
		Refuse string `json:"refuse"`
	}
	if mode == "cfgerr" && json.Unmarshal(req.Config, &cfg) == nil && cfg.Refuse != "" {
		if _, err := os.Stat(cfg.Refuse); err == nil {
			return nil, status.Error(codes.Internal, "configure exploded")
		}
	}
	return &providerv1.ConfigureResponse{}, nil
}

func (server) Health(_ context.Context, req *providerv1.HealthRequest) (*providerv1.HealthResponse, error) {
	resp := &providerv1.HealthResponse{}
	if mode == "bighealth" && !req.LivenessOnly {
		for i := range 40 {
			resp.Channels = append(resp.Channels, &providerv1.ChannelHealth{Channel: fmt.Sprint("ch", i), Error: strings.Repeat("H", 1<<20)})
		}
	}
	if mode == "manyhealth" && !req.LivenessOnly {
		for i := range 2000 {
			resp.Channels = append(resp.Channels, &providerv1.ChannelHealth{Channel: fmt.Sprint("invented-", i), Error: strings.Repeat("H", 1<<10)})
		}
	}
	return resp, nil
}

func (server) Send(ctx context.Context, req *providerv1.SendRequest) (*providerv1.SendResponse, error) {
	if mode == "bigerr" {
		return nil, status.Error(codes.Unknown, strings.Repeat("E", 2<<20))
	}
	if mode == "bigmeta" {
		md := metadata.MD{}
		for i := range 8 {
			md.Set(fmt.Sprint("x-flood-", i), strings.Repeat("m", 1<<20))
		}
		_ = grpc.SetTrailer(ctx, md)
	}
	if mode == "answerlate" && len(req.Messages) > 0 && req.Messages[0].DeadlineUnixNano != 0 {
		time.Sleep(time.Until(time.Unix(0, req.Messages[0].DeadlineUnixNano)))
	}
	resp := &providerv1.SendResponse{}
	for range req.Messages {
		v := &providerv1.Verdict{Outcome: providerv1.Outcome_OUTCOME_SUCCESS}
		if mode == "bigresult" {
			v.Result = []byte(`"` + strings.Repeat("r", 40<<20) + `"`)
		}
		resp.Verdicts = append(resp.Verdicts, v)
	}
	return resp, nil
}

func (server) SendStream(req *providerv1.SendRequest, out providerv1.Provider_SendStreamServer) error {
	if !strings.HasPrefix(mode, "stream") {
		return status.Error(codes.Unimplemented, "method SendStream not implemented")
	}
	ok := func(i int, result []byte) *providerv1.SendProgress {
		return &providerv1.SendProgress{Verdicts: []*providerv1.IndexedVerdict{
			{Index: int32(i), Verdict: &providerv1.Verdict{Outcome: providerv1.Outcome_OUTCOME_SUCCESS, Result: result}}}}
	}
	if err := out.Send(ok(0, nil)); err != nil {
		return err
	}
	switch mode {
	case "streamstray":
		return out.Send(ok(99, nil))
	case "streamtwice":
		return out.Send(&providerv1.SendProgress{Verdicts: []*providerv1.IndexedVerdict{
			{Index: 0, Verdict: &providerv1.Verdict{Outcome: providerv1.Outcome_OUTCOME_PERMANENT, Detail: "changed my mind"}}}})
	case "streamempty":
		for {
			if err := out.Send(&providerv1.SendProgress{}); err != nil {
				return err
			}
		}
	case "streamhold", "streambig":
		for i := 1; i < len(req.Messages); i++ {
			var p struct {
				Result int `json:"result"`
			}
			_ = json.Unmarshal(req.Messages[i].Payload, &p)
			var result []byte
			if p.Result >= 2 {
				result = []byte(`"` + strings.Repeat("r", p.Result-2) + `"`)
			}
			if err := out.Send(ok(i, result)); err != nil {
				return err
			}
		}
		if mode == "streamhold" {
			<-out.Context().Done()
		}
	}
	return nil
}

type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

var flooding atomic.Bool

func (grpcPlugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	providerv1.RegisterProviderServer(s, server{})
	if mode == "brokerflood" && flooding.CompareAndSwap(false, true) {
		var next atomic.Uint32
		next.Store(1 << 20)
		for range 4 {
			go func() {
				for {
					l, err := b.Accept(next.Add(1))
					if err != nil {
						continue
					}
					_ = l.Close()
				}
			}()
		}
	}
	return nil
}

func (grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  providerv1.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{providerv1.Version: {providerv1.PluginName: grpcPlugin{}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxSendMsgSize(providerv1.MaxMessageBytes))...)
		},
	})
}
