package buildkitd_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"bex.co/bex/internal/buildkitd"
)

// allocEnv makes the test binary, run again, a process that waits for a
// line on stdin (its placement in the cgroup) and then allocates and
// touches the number of MiB the variable says.
const allocEnv = "BEX_BUILDKITD_TEST_ALLOC_MIB"

func TestMain(m *testing.M) {
	if v := os.Getenv(allocEnv); v != "" {
		n, _ := strconv.Atoi(v)
		fmt.Scanln()
		var keep [][]byte
		for i := range n {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(i + j)
			}
			keep = append(keep, b)
		}
		fmt.Printf("allocated %d MiB\n", len(keep))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cgroupDir is the directory of the cgroup below the hierarchy of
// controller (cgroup v1) or the unified hierarchy.
func cgroupDir(controller, path string) string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return filepath.Join("/sys/fs/cgroup", path)
	}
	return filepath.Join("/sys/fs/cgroup", controller, path)
}

// A process in a build's cgroup that allocates past its memory limit is
// killed, the cgroup says so, and Remove leaves nothing behind.
func TestCgroupBoundsMemory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups are made by root")
	}
	name := fmt.Sprintf("test-%d", os.Getpid())
	g, err := buildkitd.NewCgroup(name, buildkitd.StepLimits{Memory: 32 << 20, CPUMilli: 500, Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove() })
	if g.Parent() != "bex-builds/"+name {
		t.Errorf("Parent() = %q, want bex-builds/%s", g.Parent(), name)
	}
	pids, err := os.ReadFile(filepath.Join(cgroupDir("pids", g.Parent()), "pids.max"))
	if err != nil || strings.TrimSpace(string(pids)) != "64" {
		t.Errorf("pids.max = %q (%v), want 64", pids, err)
	}

	run := func(mib int) (string, error) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), allocEnv+"="+strconv.Itoa(mib))
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := []byte(strconv.Itoa(cmd.Process.Pid))
		for _, c := range []string{"memory", "cpu", "pids"} {
			if err := os.WriteFile(filepath.Join(cgroupDir(c, g.Parent()), "cgroup.procs"), pid, 0o644); err != nil {
				cmd.Process.Kill()
				t.Fatalf("placing the process in the %s cgroup: %v", c, err)
			}
		}
		in.Write([]byte("\n"))
		in.Close()
		err = cmd.Wait()
		return out.String(), err
	}
	if out, err := run(8); err != nil || g.MemoryLimitReached() {
		t.Fatalf("8 MiB under a limit of 32 MiB: %v (MemoryLimitReached %v)\n%s", err, g.MemoryLimitReached(), out)
	}
	out, err := run(128)
	if err == nil {
		t.Fatalf("128 MiB under a limit of 32 MiB: the process was not killed\n%s", out)
	}
	if !g.MemoryLimitReached() {
		t.Errorf("the process was killed (%v), but MemoryLimitReached says no", err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"memory", "cpu", "pids"} {
		if _, err := os.Stat(cgroupDir(c, g.Parent())); err == nil {
			t.Errorf("the %s cgroup is still there after Remove", c)
		}
	}
}

func TestCgroupNameIsOneElement(t *testing.T) {
	for _, name := range []string{"", "../escape", "a/b", "."} {
		if _, err := buildkitd.NewCgroup(name, buildkitd.StepLimits{}); err == nil {
			t.Errorf("NewCgroup(%q) succeeded", name)
		}
	}
}
