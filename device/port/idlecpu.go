package port

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"falconnic/internal/clock"
)

// idleCPU tells a port whether the host has a CPU that no other thread
// wants, so that spinning for a polling ULP's deadlines takes nothing from
// anyone. A spinning port that is not starved itself can starve what runs
// beside it: on a 2-core host whose two TCG guests busy-poll their
// completion queues (perftest's latency programs), NIC-side doorbell
// polling by spinning doubled the round trip (README, "RDMA between two
// guests"). The answer comes from the kernel's count of runnable threads
// (/proc/loadavg's fourth field), read at most every idleCPUEvery.
type idleCPU struct {
	mu    sync.Mutex
	at    clock.Time // when spare was read (0: never)
	spare bool
	cpus  int
	// running reads the host's runnable threads, the caller's included.
	running func() (int, bool)
}

// idleCPUEvery bounds how often the runnable threads are read.
const idleCPUEvery = 5 * time.Millisecond

var hostIdle = &idleCPU{cpus: runtime.NumCPU(), running: procRunning}

// spareAt reports whether, at now, the runnable threads other than the
// caller leave a CPU free. Unknown (no /proc) counts as free.
func (c *idleCPU) spareAt(now clock.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == 0 || now-c.at >= idleCPUEvery || now < c.at {
		n, ok := c.running()
		c.spare, c.at = !ok || n <= c.cpus, max(now, 1)
	}
	return c.spare
}

// procRunning reads the runnable threads from /proc/loadavg ("0.50 0.40
// 0.30 3/115 918": 3 runnable of 115).
func procRunning() (int, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	return parseLoadavgRunning(b)
}

func parseLoadavgRunning(b []byte) (int, bool) {
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0, false
	}
	run, _, ok := bytes.Cut(f[3], []byte{'/'})
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(run))
	return n, err == nil && n >= 0
}
