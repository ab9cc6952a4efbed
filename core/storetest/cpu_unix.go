//go:build unix

package storetest

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system) the process has used so
// far: benchmarks report it beside the wall time, which on a shared
// machine also counts the time spent waiting for a core.
func ProcessCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
