package platformtest

import (
	"fmt"
	"os"
	"strings"
)

// ProcessAlive reports whether process pid runs: it exists and is not a
// zombie (a killed child no one has reaped yet).
func ProcessAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces; the state follows its ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
