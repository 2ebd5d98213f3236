package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS returns the resident set size of process pid, in bytes: VmRSS of
// /proc/<pid>/status (the anonymous, file-backed and shared memory the
// process has in RAM now, not what it freed but the kernel has not taken
// back yet).
func RSS(pid int) (uint64, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the memory of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: VmRSS %q: %w", path, strings.TrimSpace(v), err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%s has no VmRSS (a kernel thread, or a zombie)", path)
}
