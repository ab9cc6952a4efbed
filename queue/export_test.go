package queue

import "time"

// SetMaxBlock sets the longest single block of r's Claims on the doorbell,
// so that a test can tell a wake-up from the end of a block.
func SetMaxBlock(r *Redis, d time.Duration) { r.maxBlock = d }
