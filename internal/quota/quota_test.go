package quota_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"bex.co/bex/internal/quota"
)

// TestFlags: --quota-cpu and --quota-memory take Kubernetes quantities,
// in millicores and bytes; what is not one, or is negative, is refused
// saying what to give.
func TestFlags(t *testing.T) {
	parse := func(args ...string) (*quota.Defaults, error) {
		d := quota.NewDefaults()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		d.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			return d, err
		}
		return d, d.Validate()
	}
	d, err := parse()
	if err != nil || d.MilliCPU != 16000 || d.MemoryBytes != 32<<30 {
		t.Errorf("the defaults: cpu %dm, memory %d, %v; want 16000m and 32 GiB", d.MilliCPU, d.MemoryBytes, err)
	}
	d, err = parse("--quota-cpu=2500m", "--quota-memory=1.5Gi")
	if err != nil || d.MilliCPU != 2500 || d.MemoryBytes != 3<<29 {
		t.Errorf("--quota-cpu=2500m --quota-memory=1.5Gi: cpu %dm, memory %d, %v", d.MilliCPU, d.MemoryBytes, err)
	}
	if d, err = parse("--quota-cpu=4"); err != nil || d.MilliCPU != 4000 {
		t.Errorf("--quota-cpu=4: %dm, %v; want 4000m", d.MilliCPU, err)
	}
	for _, tc := range []struct{ arg, want string }{
		{"--quota-cpu=lots", `"lots" is not a CPU quantity: give CPUs such as 16 or 2500m`},
		{"--quota-memory=32GB!", `"32GB!" is not a memory quantity: give bytes such as 32Gi or 512Mi`},
		{"--quota-memory=-1Gi", "-1Gi: must not be negative"},
	} {
		if _, err := parse(tc.arg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.arg, err, tc.want)
		}
	}
}
