// Command pingflood is a hostile test plugin: a working provider (every
// Send SUCCESS) whose process floods the host's connection with HTTP/2
// control frames — PINGs, each of which the host's gRPC answers, as fast as
// the connection takes them — from the moment it is served. It prints
// go-plugin's handshake itself and serves through a proxy of its own that
// writes the frames between the gRPC server's.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"

	"github.com/notifyd/notifyd/sdk/proto/providerv1"
)

type server struct {
	providerv1.UnimplementedProviderServer
}

func (server) Describe(context.Context, *providerv1.DescribeRequest) (*providerv1.DescribeResponse, error) {
	return &providerv1.DescribeResponse{Name: "pingflood", Version: "0"}, nil
}

func (server) Configure(context.Context, *providerv1.ConfigureRequest) (*providerv1.ConfigureResponse, error) {
	return &providerv1.ConfigureResponse{}, nil
}

func (server) Health(context.Context, *providerv1.HealthRequest) (*providerv1.HealthResponse, error) {
	return &providerv1.HealthResponse{}, nil
}

func (server) Send(_ context.Context, req *providerv1.SendRequest) (*providerv1.SendResponse, error) {
	resp := &providerv1.SendResponse{}
	for range req.Messages {
		resp.Verdicts = append(resp.Verdicts, &providerv1.Verdict{Outcome: providerv1.Outcome_OUTCOME_SUCCESS})
	}
	return resp, nil
}

func main() {
	dir, err := os.MkdirTemp("", "pingflood")
	if err != nil {
		panic(err)
	}
	inner, outer := filepath.Join(dir, "inner"), filepath.Join(dir, "outer")
	li, err := net.Listen("unix", inner)
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	providerv1.RegisterProviderServer(srv, server{})
	go func() { _ = srv.Serve(li) }()
	lo, err := net.Listen("unix", outer)
	if err != nil {
		panic(err)
	}
	fmt.Printf("1|%d|unix|%s|grpc|\n", providerv1.Version, outer)
	for {
		c, err := lo.Accept()
		if err != nil {
			return
		}
		go proxy(c, inner)
	}
}

// proxy forwards the host's connection to the gRPC server, frame by frame
// from the server, and once the server's first frame (its SETTINGS) is out,
// writes PING frames between them as fast as the host reads.
func proxy(c net.Conn, inner string) {
	up, err := net.Dial("unix", inner)
	if err != nil {
		return
	}
	go func() { _, _ = io.Copy(up, c) }()
	var mu sync.Mutex
	ping := make([]byte, 9+8)
	binary.BigEndian.PutUint32(ping[0:4], 8<<8) // length 8, then type
	ping[3] = 0x6                               // PING
	flood := make([]byte, 0, len(ping)*4096)
	for range 4096 {
		flood = append(flood, ping...)
	}
	first := true
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(up, hdr); err != nil {
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		payload := make([]byte, n)
		if _, err := io.ReadFull(up, payload); err != nil {
			return
		}
		mu.Lock()
		_, err := c.Write(append(hdr[:9:9], payload...))
		mu.Unlock()
		if err != nil {
			return
		}
		if first {
			first = false
			go func() {
				for {
					mu.Lock()
					_, err := c.Write(flood)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}
}
