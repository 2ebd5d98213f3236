package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Usage returns the CPU time (seconds) the container's processes used
// since it started and the memory they use now (bytes), from its cgroup:
// cgroup v1's cpuacct.usage and memory.usage_in_bytes, or v2's cpu.stat
// usage_usec and memory.current.
func (c *Container) Usage() (cpuSeconds float64, memoryBytes int64, err error) {
	return cgroupUsage(cgroupRoot, c.cgroup)
}

// cgroupUsage reads the usage of cgroup under root.
func cgroupUsage(root, cgroup string) (float64, int64, error) {
	if ns, err := readInt(filepath.Join(root, "cpuacct", cgroup, "cpuacct.usage")); err == nil {
		mem, err := readInt(filepath.Join(root, "memory", cgroup, "memory.usage_in_bytes"))
		if err != nil {
			return 0, 0, fmt.Errorf("reading the memory of cgroup %s: %w", cgroup, err)
		}
		return float64(ns) / 1e9, mem, nil
	}
	stat, err := os.ReadFile(filepath.Join(root, cgroup, "cpu.stat"))
	if err != nil {
		return 0, 0, fmt.Errorf("reading the CPU time of cgroup %s: %w", cgroup, err)
	}
	var usec int64 = -1
	for _, line := range strings.Split(string(stat), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "usage_usec" {
			usec, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if usec < 0 {
		return 0, 0, fmt.Errorf("cgroup %s: cpu.stat has no usage_usec", cgroup)
	}
	mem, err := readInt(filepath.Join(root, cgroup, "memory.current"))
	if err != nil {
		return 0, 0, fmt.Errorf("reading the memory of cgroup %s: %w", cgroup, err)
	}
	return float64(usec) / 1e6, mem, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
