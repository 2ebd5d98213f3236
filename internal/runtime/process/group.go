package process

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
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
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(data[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(string(f[2])); g == pgid {
			return true
		}
	}
	return false
}
