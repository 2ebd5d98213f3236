package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The build limits' flags parse as quantities, default to 1 CPU and
// 4 GiB disks, and refuse what the kernel or ext4 cannot take, naming the
// flag.
func TestBuildLimitFlags(t *testing.T) {
	for _, c := range []struct {
		args             []string
		cpu, disk, cache int64
		err              string
	}{
		{args: nil, cpu: 1000, disk: 4 << 30, cache: 4 << 30},
		{args: []string{"--build-cpu=500m", "--build-disk=64Mi", "--build-cache-disk=1Gi"}, cpu: 500, disk: 64 << 20, cache: 1 << 30},
		{args: []string{"--build-cpu=2"}, cpu: 2000, disk: 4 << 30, cache: 4 << 30},
		{args: []string{"--build-cpu=1m"}, err: "--build-cpu 1m: want at least 10m"},
		{args: []string{"--build-cpu=lots"}, err: `--build-cpu "lots"`},
		{args: []string{"--build-disk=1Mi"}, err: "--build-disk 1Mi: want at least 16Mi"},
		{args: []string{"--build-cache-disk=4G1"}, err: `--build-cache-disk "4G1"`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			o, err := parseOptions(t, c.args)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.buildCPUMilli != c.cpu || o.buildDisk != c.disk || o.buildCacheDisk != c.cache {
				t.Errorf("cpu %dm, disk %d, cache disk %d; want %dm, %d, %d", o.buildCPUMilli, o.buildDisk, o.buildCacheDisk, c.cpu, c.disk, c.cache)
			}
		})
	}
}

// --managed-control-plane is refused with what would leave the plane
// without the machines that serve it, saying what to drop.
func TestManagedControlPlaneFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{args: []string{"--managed-control-plane"}},
		{args: []string{"--managed-control-plane", "--no-local-fleet"}, err: "drop --no-local-fleet"},
		{args: []string{"--managed-control-plane", "--apiservers=3"}, err: "drop --apiservers 3"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := parseOptions(t, c.args)
			switch {
			case c.err == "" && err != nil:
				t.Fatal(err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one with %q", err, c.err)
			}
		})
	}
}

// parseOptions parses args as bex-embedded's flags and returns the
// options with Complete's error, or else Validate's.
func parseOptions(t *testing.T, args []string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("bex-embedded", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		return o, err
	}
	return o, o.Validate()
}
