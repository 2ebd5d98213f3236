package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// cpuTimes are the machine's CPU times in clock ticks, all cores
// together, from the first line of /proc/stat.
type cpuTimes struct {
	busy, total uint64
	cores       int
}

// readCPU reads /proc/stat.
func readCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPU(string(b), runtime.NumCPU())
}

// parseCPU reads the "cpu" line of /proc/stat: user, nice, system, idle,
// iowait, irq, softirq, steal; idle and iowait are not busy.
func parseCPU(stat string, cores int) (cpuTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat starts with %q, not the cpu line", line)
	}
	var c cpuTimes
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		c.total += v
		if i != 3 && i != 4 {
			c.busy += v
		}
	}
	c.cores = cores
	return c, nil
}

// busyUntil says how busy the cores were from c to d.
func (c cpuTimes) busyUntil(d cpuTimes) string {
	total := d.total - c.total
	if total == 0 {
		return "not measured"
	}
	frac := float64(d.busy-c.busy) / float64(total)
	return fmt.Sprintf("%.0f%% of %d cores (%.2f cores on average)", 100*frac, c.cores, frac*float64(c.cores))
}
