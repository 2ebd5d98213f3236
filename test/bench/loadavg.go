package bench

import (
	"os"
	"strings"
)

// LoadAverage is the machine's load average over 1, 5 and 15 minutes, as
// uptime gives it ("3.34 4.17 4.16"); "unknown" when /proc cannot say.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
