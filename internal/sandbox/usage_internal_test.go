package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupStats reads the files of a cgroup v1 and a v2 hierarchy as
// the kernel lays them out: the working set is the usage less the
// inactive file cache.
func TestCgroupStats(t *testing.T) {
	const cg = "/bex-sandbox/c1"
	write := func(t *testing.T, root string, files map[string]string) {
		t.Helper()
		for name, content := range files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Stats
	}{{
		name: "v1",
		files: map[string]string{
			"cpuacct" + cg + "/cpuacct.usage":        "2500000000\n",
			"memory" + cg + "/memory.usage_in_bytes": "104857600\n",
			"memory" + cg + "/memory.stat":           "cache 4194304\ninactive_file 1\ntotal_inactive_file 4194304\n",
		},
		want: Stats{CPUNanoseconds: 2_500_000_000, MemoryBytes: 100 << 20, WorkingSetBytes: 96 << 20},
	}, {
		name: "v2",
		files: map[string]string{
			cg[1:] + "/cpu.stat":       "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
			cg[1:] + "/memory.current": "52428800\n",
			cg[1:] + "/memory.stat":    "anon 41943040\nactive_file 1\ninactive_file 2097152\n",
		},
		want: Stats{CPUNanoseconds: 1_500_000_000, MemoryBytes: 50 << 20, WorkingSetBytes: 48 << 20},
	}, {
		name: "more inactive cache than usage",
		files: map[string]string{
			cg[1:] + "/cpu.stat":       "usage_usec 1\n",
			cg[1:] + "/memory.current": "4096\n",
			cg[1:] + "/memory.stat":    "inactive_file 8192\n",
		},
		want: Stats{CPUNanoseconds: 1000, MemoryBytes: 4096},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tc.files)
			got, err := cgroupStats(root, cg)
			if err != nil || got != tc.want {
				t.Fatalf("cgroupStats = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := cgroupStats(t.TempDir(), cg); err == nil {
		t.Error("a cgroup that is not there read without an error")
	}
}
