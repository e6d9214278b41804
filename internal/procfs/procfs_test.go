package procfs_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/procfs"
)

// The fields read where the command name would shift them, and CPU time
// that grows with work done; a process that is gone reads as not ok.
func TestStatAndCPU(t *testing.T) {
	f, ok := procfs.Stat("self")
	if !ok || len(f) < 13 {
		t.Fatalf("Stat(self): %v %v", f, ok)
	}
	if f[2] != strconv.Itoa(syscall.Getpgrp()) {
		t.Errorf("process group field %q, want %d", f[2], syscall.Getpgrp())
	}
	before, ok := procfs.CPU("self")
	if !ok {
		t.Fatal("CPU(self) not ok")
	}
	for deadline := time.Now().Add(10 * time.Second); ; { // spins until a tick (10 ms) is counted
		if after, _ := procfs.CPU("self"); after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU(self) stayed at %v through 10 s of spinning", before)
		}
	}
	if _, ok := procfs.CPU("0"); ok {
		t.Error("CPU of pid 0 (no such /proc entry) read as ok")
	}
}
