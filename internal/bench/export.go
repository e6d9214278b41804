package bench

import (
	"strconv"
	"time"
)

// What the peer benchmark (bench/peers, a Go module of its own, so that the
// queues it compares notifyd with never enter the daemon's go.mod) shares with
// this harness: the body every system POSTs, the recipients, and the /proc CPU
// readings.

// Envelope is the body the webhook plugin POSTs for notification id (see
// envelope).
func Envelope(id int64, recipient string, created time.Time) []byte {
	return envelope(id, recipient, created)
}

// Recipient is the burst's i-th recipient.
func Recipient(i int) string { return recipient(i) }

// Payload is every bench notification's payload.
func Payload() []byte { return append([]byte(nil), payload...) }

// ProcCPU is process pid's user+system CPU time, false when it is gone.
func ProcCPU(pid int) (time.Duration, bool) { return procCPU(strconv.Itoa(pid)) }

// MachineCPU is the busy and total time of all CPUs since boot.
func MachineCPU() (busy, total time.Duration) { return machineCPU() }

// LoadAvg is the 1, 5 and 15 minute load average.
func LoadAvg() [3]float64 { return loadAvg() }
