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

// Stats is what a container's processes use, read from its cgroup.
type Stats struct {
	// CPUNanoseconds is the CPU time they used since the container's
	// process started: cgroup v1's cpuacct.usage, v2's cpu.stat
	// usage_usec.
	CPUNanoseconds uint64
	// MemoryBytes is the memory charged to them now, the page cache
	// included: memory.usage_in_bytes (v1), memory.current (v2).
	MemoryBytes uint64
	// WorkingSetBytes is MemoryBytes less the inactive file cache
	// (memory.stat's total_inactive_file on v1, inactive_file on v2),
	// what the kernel cannot take back at once: the kubelet's (cAdvisor's)
	// working set.
	WorkingSetBytes uint64
}

// Usage returns the CPU time (seconds) the container's processes used
// since it started and the memory they use now (bytes), from its cgroup
// (Stats' CPUNanoseconds and MemoryBytes).
func (c *Container) Usage() (cpuSeconds float64, memoryBytes int64, err error) {
	s, err := c.Stats()
	if err != nil {
		return 0, 0, err
	}
	return float64(s.CPUNanoseconds) / 1e9, int64(s.MemoryBytes), nil
}

// Stats reads the container's cgroup, cgroup v1 or v2. It fails when the
// container has no cgroup (no process ran yet, or it was removed).
func (c *Container) Stats() (Stats, error) {
	return cgroupStats(cgroupRoot, c.cgroup)
}

// cgroupStats reads the usage of cgroup under root.
func cgroupStats(root, cgroup string) (Stats, error) {
	if ns, err := readUint(filepath.Join(root, "cpuacct", cgroup, "cpuacct.usage")); err == nil {
		dir := filepath.Join(root, "memory", cgroup)
		mem, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			return Stats{}, fmt.Errorf("reading the memory of cgroup %s: %w", cgroup, err)
		}
		inactive, err := statField(filepath.Join(dir, "memory.stat"), "total_inactive_file")
		if err != nil {
			return Stats{}, fmt.Errorf("reading the memory of cgroup %s: %w", cgroup, err)
		}
		return Stats{CPUNanoseconds: ns, MemoryBytes: mem, WorkingSetBytes: workingSet(mem, inactive)}, nil
	}
	dir := filepath.Join(root, cgroup)
	usec, err := statField(filepath.Join(dir, "cpu.stat"), "usage_usec")
	if err != nil {
		return Stats{}, fmt.Errorf("reading the CPU time of cgroup %s: %w", cgroup, err)
	}
	mem, err := readUint(filepath.Join(dir, "memory.current"))
	if err != nil {
		return Stats{}, fmt.Errorf("reading the memory of cgroup %s: %w", cgroup, err)
	}
	inactive, err := statField(filepath.Join(dir, "memory.stat"), "inactive_file")
	if err != nil {
		return Stats{}, fmt.Errorf("reading the memory of cgroup %s: %w", cgroup, err)
	}
	return Stats{CPUNanoseconds: usec * 1000, MemoryBytes: mem, WorkingSetBytes: workingSet(mem, inactive)}, nil
}

// workingSet is usage less the inactive file cache, never below zero.
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}

// statField reads the value of key in a flat keyed cgroup file (cpu.stat,
// memory.stat: "KEY VALUE" lines).
func statField(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			return strconv.ParseUint(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", path, key)
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
