package platformtest

import (
	"bex.co/bex/internal/procstat"
)

// ProcessAlive reports whether process pid runs: it exists and is not a
// zombie (a killed child no one has reaped yet).
func ProcessAlive(pid int) bool {
	f, err := procstat.Fields(pid)
	return err == nil && f[procstat.State] != "Z"
}
