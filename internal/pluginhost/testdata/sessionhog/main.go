// Command sessionhog is a hostile test plugin. It first starts a grandchild
// in a session of its own (setsid, so killing the plugin's process group
// does not reach it) that inherits its stdout and stderr and sleeps 120 s,
// and appends that grandchild's pid to <its executable>.children. Then, by
// the end of its file name (notifyd-plugin-<name>):
//
//	sessionhog         never completes the handshake
//	sessionhog-serve   serves a provider that delivers everything
//	sessionhog-mute    completes the handshake; Configure never answers
//	sessionhog-silent  writes a handshake line naming a socket on which it
//	                   accepts connections but never speaks gRPC
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
)

type provider struct{ mute bool }

func (provider) Describe() sdk.Info { return sdk.Info{Name: "sessionhog", Version: "1.0.0"} }

func (p provider) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	if p.mute {
		select {} // ignores its deadline, as a hung provider does
	}
	return sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }), nil
}

func main() {
	child := exec.Command("sleep", "120")
	child.Stdout, child.Stderr = os.Stdout, os.Stderr
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		os.Exit(2)
	}
	f, err := os.OpenFile(os.Args[0]+".children", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		os.Exit(2)
	}
	_, _ = f.WriteString(strconv.Itoa(child.Process.Pid) + "\n")
	_ = f.Close()
	_, mode, _ := strings.Cut(strings.TrimPrefix(filepath.Base(os.Args[0]), "notifyd-plugin-"), "-")
	switch mode {
	case "serve":
		sdk.Serve(provider{})
	case "mute":
		sdk.Serve(provider{mute: true})
	case "silent":
		dir, err := os.MkdirTemp("", "hog") // a socket path has 108 bytes at most
		if err != nil {
			os.Exit(2)
		}
		sock := filepath.Join(dir, "s")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			os.Exit(2)
		}
		fmt.Printf("1|%d|unix|%s|grpc\n", providerv1.Version, sock)
		for {
			conn, err := ln.Accept()
			if err != nil {
				os.Exit(2)
			}
			defer conn.Close() // held open, never answered
		}
	default:
		time.Sleep(time.Hour)
	}
}
