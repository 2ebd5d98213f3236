//go:build !linux

package main

import (
	"syscall"
	"time"
)

// childProcAttr: only Linux ends children with their parent.
func childProcAttr() *syscall.SysProcAttr { return nil }

// cpuTime: CPU accounting is read from /proc on Linux only.
func cpuTime(int) (time.Duration, bool) { return 0, false }

// treeCPUTime: CPU accounting is read from /proc on Linux only.
func treeCPUTime(int) (time.Duration, bool) { return 0, false }
