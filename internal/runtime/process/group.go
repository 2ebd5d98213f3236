package process

import (
	"os"
	"strconv"
	"syscall"
	"time"

	"bex.co/bex/internal/procstat"
)

// groupKillWait bounds how long a stop waits for a killed group to be gone.
const groupKillWait = 5 * time.Second

// killGroup sends SIGKILL to the process group pgid and waits, up to
// timeout, until none of its members is alive (zombies awaiting their
// parent do not count). A signal is delivered asynchronously: without the
// wait, a member can still run for a moment after kill returns.
func killGroup(pgid int, timeout time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(timeout)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether a process of group pgid is alive, reading /proc.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procstat.Fields(pid)
		if err != nil || f[procstat.State] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(f[procstat.PGRP]); g == pgid {
			return true
		}
	}
	return false
}
