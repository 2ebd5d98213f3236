package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"bex.co/bex/internal/procstat"
)

// childProcAttr has the kernel end a server process when the bench dies
// without stopping it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux the Go runtime supports).
const clockTick = 10 * time.Millisecond

// cpuTime returns the user and system CPU time process pid has used, and
// false when it cannot be read.
func cpuTime(pid int) (time.Duration, bool) {
	f, err := procstat.Fields(pid)
	if err != nil {
		return 0, false
	}
	u, err1 := procstat.Int(f, procstat.UTime)
	st, err2 := procstat.Int(f, procstat.STime)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+st) * clockTick, true
}

// treeCPUTime returns the CPU time of process pid and of its descendants
// alive now, and false when pid's cannot be read.
func treeCPUTime(pid int) (time.Duration, bool) {
	total, ok := cpuTime(pid)
	if !ok {
		return 0, false
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(c); err == nil {
				if d, ok := treeCPUTime(child); ok {
					total += d
				}
			}
		}
	}
	return total, true
}
