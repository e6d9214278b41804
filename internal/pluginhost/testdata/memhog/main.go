// Command memhog is a hostile test plugin: a working provider whose messages
// can make it take memory and keep it. A payload {"eat": N} allocates N MiB
// on its heap, a MiB at a time, and writes every page of it; {"big": N}
// allocates N MiB at once and writes it; {"shm": N} maps N MiB of shared
// anonymous memory (which RLIMIT_DATA does not count) and writes it;
// {"child": N} starts a process of its own (a helper, a worker) that
// allocates N MiB and writes it, and answers its pid as the result once it
// has. Each then succeeds, holding the memory for the life of the process.
// Anything else succeeds at once.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"

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
		Eat   int `json:"eat"`
		Big   int `json:"big"`
		Shm   int `json:"shm"`
		Child int `json:"child"`
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
	case p.Child > 0:
		exe, err := os.Executable()
		if err != nil {
			return sdk.Permanent(err.Error())
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "MEMHOG_CHILD="+strconv.Itoa(p.Child))
		out, err := cmd.StdoutPipe()
		if err != nil {
			return sdk.Permanent(err.Error())
		}
		if err := cmd.Start(); err != nil {
			return sdk.Permanent(err.Error())
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			return sdk.Permanent("child: " + err.Error())
		}
		return sdk.Success(json.RawMessage(fmt.Sprintf(`{"child_pid":%d}`, cmd.Process.Pid)))
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

func main() {
	if n, _ := strconv.Atoi(os.Getenv("MEMHOG_CHILD")); n > 0 {
		b := make([]byte, n<<20)
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		fmt.Println("ready")
		select {}
	}
	sdk.Serve(provider{})
}
