// Command memhog is a hostile test plugin: a working provider whose messages
// can make it take memory and keep it. A payload {"eat": N} allocates N MiB
// on its heap, a MiB at a time, and writes every page of it; {"big": N}
// allocates N MiB at once and writes it; {"shm": N} maps N MiB of shared
// anonymous memory (which RLIMIT_DATA does not count) and writes it. Each
// then succeeds, holding the memory for the life of the process. Anything
// else succeeds at once.
package main

import (
	"context"
	"encoding/json"
	"os"

	"golang.org/x/sys/unix"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info { return sdk.Info{Name: "memhog", Version: "1.0.0"} }

func (provider) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(send), nil
}

var held [][]byte // kept for the life of the process

func send(_ context.Context, m sdk.Message) sdk.Verdict {
	var p struct {
		Eat int `json:"eat"`
		Big int `json:"big"`
		Shm int `json:"shm"`
	}
	_ = json.Unmarshal(m.Payload, &p)
	switch {
	case p.Eat > 0:
		for range p.Eat {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += os.Getpagesize() {
				b[i] = 1
			}
			held = append(held, b)
		}
	case p.Big > 0:
		b := make([]byte, p.Big<<20)
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		held = append(held, b)
	case p.Shm > 0:
		b, err := unix.Mmap(-1, 0, p.Shm<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			return sdk.Permanent("mmap: " + err.Error())
		}
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		held = append(held, b)
	}
	return sdk.Success(nil)
}

func main() { sdk.Serve(provider{}) }
