package sdk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/notifyd/notifyd/sdk/proto/providerv1"
)

// parentPoll is how often a plugin checks that its host is still alive. The
// host also asks the kernel to kill the plugin when it dies (Linux), so this
// is the fallback that keeps the promise elsewhere: gone within 2 s.
const parentPoll = 500 * time.Millisecond

// Serve runs p as a notifyd provider plugin: it is the whole of a plugin's
// main. It speaks protocol notifyd.provider.v1 to the host over gRPC
// (hashicorp/go-plugin), logs to stderr (the host shows those lines tagged
// with the plugin's name), and exits when the host goes away. Run by hand, the
// binary says it is a plugin and exits 1.
//
//	func main() { sdk.Serve(&myProvider{}) }
func Serve(p Provider) {
	info, err := describe(p)
	log := newLogger(info.Name)
	if err != nil {
		// Before the handshake: the host reports this line with its start error.
		fmt.Fprintf(os.Stderr, "notifyd plugin: %v\n", err)
		os.Exit(1)
	}
	setMaxProcs(log)
	tr, flush := setupTracing(info, log)
	exit := func() {
		// Spans still buffered go out first, within the host's grace period.
		ctx, cancel := context.WithTimeout(context.Background(), exitFlush)
		flush(ctx)
		cancel()
	}
	go watchParent(log, os.Getppid(), exit)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  providerv1.Handshake(),
		VersionedPlugins: pluginSet(newServer(p, info, log, tr)),
		GRPCServer:       newGRPCServer,
		Logger:           quietClose{log},
	})
	exit()
}

// exitFlush bounds the export of buffered spans when the plugin stops: the
// host kills a plugin that has not exited 2 s after asking it to.
const exitFlush = time.Second

// ServeInProcess serves p inside this process, exactly as Serve does in a
// plugin binary but over a local socket in go-plugin's test mode, until ctx
// ends; closed is closed once it has stopped. It is for sdk/sdktest and
// other in-process harnesses: a plugin's main calls Serve. A traced
// message's Send gets its trace in ctx as under Serve, but the SDK records no
// span of its own and sets up no exporter: the process is not the plugin's.
func ServeInProcess(ctx context.Context, p Provider, log hclog.Logger) (attach *plugin.ReattachConfig, closed <-chan struct{}, err error) {
	info, err := describe(p)
	if err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	attachCh := make(chan *plugin.ReattachConfig, 1)
	closeCh := make(chan struct{})
	go plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  providerv1.Handshake(),
		VersionedPlugins: pluginSet(newServer(p, info, log, tracing{plugin: info.Name})),
		GRPCServer:       newGRPCServer,
		Logger:           quietClose{log},
		Test:             &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: attachCh, CloseCh: closeCh},
	})
	select {
	case attach = <-attachCh:
		return attach, closeCh, nil
	case <-closeCh:
		return nil, nil, errors.New("serve in process: plugin server stopped before it listened")
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("serve in process: %w", ctx.Err())
	}
}

// quietClose is the logger go-plugin serves an in-process provider with: at
// the end of a test go-plugin closes the listener under its own gRPC server,
// which then reports "grpc server: … use of closed network connection" as an
// ERROR although nothing went wrong. That one line is logged at DEBUG;
// everything else passes through.
type quietClose struct{ hclog.Logger }

func (q quietClose) Error(msg string, args ...any) {
	if msg == "grpc server" && closedListener(args) {
		q.Logger.Debug(msg, args...)
		return
	}
	q.Logger.Error(msg, args...)
}

func (q quietClose) Named(name string) hclog.Logger { return quietClose{q.Logger.Named(name)} }
func (q quietClose) ResetNamed(name string) hclog.Logger {
	return quietClose{q.Logger.ResetNamed(name)}
}
func (q quietClose) With(args ...any) hclog.Logger { return quietClose{q.Logger.With(args...)} }

func closedListener(args []any) bool {
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, net.ErrClosed) {
			return true
		}
	}
	return false
}

// describe asks the provider who it is, once: a Provider's Describe may be
// arbitrary code, and the answer must not change under the host.
func describe(p Provider) (info Info, err error) {
	if p == nil {
		return Info{}, errors.New("Serve called with a nil Provider")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Describe panicked: %v", r)
		}
	}()
	info = p.Describe()
	return info, validateInfo(info)
}

func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts,
		grpc.MaxRecvMsgSize(providerv1.MaxMessageBytes),
		grpc.MaxSendMsgSize(providerv1.MaxMessageBytes),
	)...)
}

// newLogger writes JSON lines to stderr, which go-plugin parses on the host
// side and re-logs at the same level, tagged with the plugin's name.
func newLogger(name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv(providerv1.EnvLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// watchParent exits the plugin once its parent (the host) is gone: the
// orphan is re-parented, so its parent pid changes.
func watchParent(log hclog.Logger, ppid int, exit func()) {
	for range time.Tick(parentPoll) {
		if os.Getppid() != ppid {
			log.Info("host exited; plugin stopping", "host_pid", ppid)
			exit()
			os.Exit(0)
		}
	}
}

// grpcPlugin is the go-plugin glue: it registers the server in the plugin
// process; on the client side it hands out the raw gRPC client.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv providerv1.ProviderServer
}

func pluginSet(srv providerv1.ProviderServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		providerv1.Version: {providerv1.PluginName: &grpcPlugin{srv: srv}},
	}
}

func (g *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	providerv1.RegisterProviderServer(s, g.srv)
	return nil
}

func (g *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return providerv1.NewProviderClient(cc), nil
}
