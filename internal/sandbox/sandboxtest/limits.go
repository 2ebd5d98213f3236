package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"bex.co/bex/internal/procstat"
)

// CgroupLimits is what a container's cgroup holds its processes to, as
// the kernel reads it back, in cgroup v2's terms on either version.
type CgroupLimits struct {
	// MemoryBytes is memory.max (v2) or memory.limit_in_bytes (v1); -1
	// for none.
	MemoryBytes int64
	// CPU is cpu.max: "QUOTA PERIOD" in microseconds, "max PERIOD"
	// without a quota (v1: cpu.cfs_quota_us and cpu.cfs_period_us).
	CPU string
	// Pids is pids.max: a number, or "max".
	Pids string
}

// cgroupBase is the prefix of every sandbox container's cgroup
// (sandbox.Container's cgroupsPath).
const cgroupBase = "/bex-sandbox/"

// ContainerLimits reads the limits of the container that pid runs: pid's
// own cgroup when it is a container's, or else that of the first of its
// descendants in one. The process driver's instances' pids are those of
// `runc run`, whose container's processes are its descendants.
func ContainerLimits(pid int) (CgroupLimits, error) {
	pids, err := withDescendants(pid)
	if err != nil {
		return CgroupLimits{}, err
	}
	for _, p := range pids {
		dirs, err := cgroupDirs(p)
		if err != nil {
			// A process that ended meanwhile.
			continue
		}
		if dirs.container {
			return dirs.limits()
		}
	}
	return CgroupLimits{}, fmt.Errorf("neither process %d nor one of its %d descendants runs in a sandbox container (a cgroup under %s)", pid, len(pids)-1, cgroupBase)
}

// withDescendants returns pid and every process below it, parents
// before their children.
func withDescendants(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procstat.Fields(p)
		if err != nil {
			continue
		}
		if ppid, err := strconv.Atoi(f[procstat.PPID]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// dirs are the directories of a process's cgroups that hold its limits.
type dirs struct {
	// memory, cpu and pids are the v1 hierarchies' directories, empty on
	// a host of cgroup v2 only; unified is the v2 directory.
	memory, cpu, pids, unified string
	// container says the process is in a sandbox container's cgroup.
	container bool
}

// cgroupDirs reads /proc/PID/cgroup: "ID:CONTROLLERS:PATH" lines, v1
// hierarchies mounted at /sys/fs/cgroup/CONTROLLERS, v2's ("0::PATH") at
// /sys/fs/cgroup itself when no v1 hierarchy holds the memory controller.
func cgroupDirs(pid int) (dirs, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return dirs{}, err
	}
	var d dirs
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctls, path := parts[1], parts[2]
		if ctls == "" {
			d.unified = filepath.Join("/sys/fs/cgroup", path)
			d.container = d.container || strings.Contains(path, cgroupBase)
			continue
		}
		for _, ctl := range strings.Split(ctls, ",") {
			dir := filepath.Join("/sys/fs/cgroup", ctls, path)
			switch ctl {
			case "memory":
				d.memory = dir
				d.container = d.container || strings.Contains(path, cgroupBase)
			case "cpu":
				d.cpu = dir
			case "pids":
				d.pids = dir
			}
		}
	}
	return d, nil
}

// limits reads the limits in d's directories.
func (d dirs) limits() (CgroupLimits, error) {
	read := func(dir, name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("reading the container's limits: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	memDir, memFile, cpuDir, pidsDir := d.unified, "memory.max", d.unified, d.unified
	if d.memory != "" {
		memDir, memFile, cpuDir, pidsDir = d.memory, "memory.limit_in_bytes", d.cpu, d.pids
	}
	var l CgroupLimits
	mem, err := read(memDir, memFile)
	if err != nil {
		return l, err
	}
	l.MemoryBytes = -1
	if mem != "max" {
		if l.MemoryBytes, err = strconv.ParseInt(mem, 10, 64); err != nil {
			return l, fmt.Errorf("reading the container's memory limit %q: %w", mem, err)
		}
	}
	if l.Pids, err = read(pidsDir, "pids.max"); err != nil {
		return l, err
	}
	if d.memory == "" {
		l.CPU, err = read(cpuDir, "cpu.max")
		return l, err
	}
	quota, err := read(cpuDir, "cpu.cfs_quota_us")
	if err != nil {
		return l, err
	}
	period, err := read(cpuDir, "cpu.cfs_period_us")
	if err != nil {
		return l, err
	}
	if quota == "-1" {
		quota = "max"
	}
	l.CPU = quota + " " + period
	return l, nil
}
