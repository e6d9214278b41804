// Command stdouthog is a hostile test plugin: it starts a child that
// inherits its stdout (so the host's reader of that stdout never sees EOF
// while the child lives), writes the child's pid next to itself, and never
// completes the handshake.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	child := exec.Command("sleep", "600")
	child.Stdout = os.Stdout
	if err := child.Start(); err != nil {
		os.Exit(2)
	}
	pidFile := filepath.Join(filepath.Dir(os.Args[0]), "stdouthog.child")
	_ = os.WriteFile(pidFile, []byte(strconv.Itoa(child.Process.Pid)), 0o644)
	time.Sleep(time.Hour)
}
