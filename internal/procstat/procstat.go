package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Field numbers of proc(5), as Fields indexes them: Fields(pid)[State]
// is field 3.
const (
	State     = 0  // field 3: R, S, D, Z, …
	PPID      = 1  // field 4
	PGRP      = 2  // field 5
	UTime     = 11 // field 14, clock ticks
	STime     = 12 // field 15
	CUTime    = 13 // field 16
	CSTime    = 14 // field 17
	StartTime = 19 // field 22, clock ticks since boot
)

// Fields returns the fields of process pid's stat that follow its
// command name: field 3 (State) onwards. It fails when the process is
// gone or its stat has fewer than 20 such fields.
func Fields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("reading /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) <= StartTime {
		return nil, fmt.Errorf("reading /proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	return f, nil
}

// Int returns field k of f (Fields' answer) as an integer.
func Int(f []string, k int) (int64, error) {
	return strconv.ParseInt(f[k], 10, 64)
}
