//go:build !unix

package storetest

import "time"

// ProcessCPU is 0 where the process's CPU time is not read.
func ProcessCPU() time.Duration { return 0 }
