package buildkitd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StepLimits bound what the RUN steps of one build use together. Zero
// fields are not limited.
type StepLimits struct {
	// Memory is the memory limit in bytes.
	Memory int64
	// CPUMilli is the CPU limit in thousandths of a core (a CFS quota).
	CPUMilli int64
	// Pids bounds the processes and threads.
	Pids int64
}

// cgroupRoot is where the machine's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Cgroup is the cgroup one build's RUN steps run under, with the build's
// limits on it. buildkitd places each step's container below the path a
// build gives as its cgroup-parent frontend option (Parent), so the limits
// hold for all of the build's steps: a step that allocates past the memory
// limit is killed, a fork bomb stops at the pids limit. It works only for
// a buildkitd on this machine that uses the cgroupfs driver (what Start
// runs).
type Cgroup struct {
	path   string // below each hierarchy's root: bex-builds/<name>
	v2     bool
	memory int64 // the memory limit, 0 for none
}

// NewCgroup makes the cgroup bex-builds/<name> in each hierarchy of the
// machine (cgroup v1: memory, cpu and pids; or the unified v2 hierarchy)
// and writes l on it. Remove takes it away.
func NewCgroup(name string, l StepLimits) (*Cgroup, error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("invalid build cgroup name %q: want one path element without dots", name)
	}
	g := &Cgroup{path: filepath.Join("bex-builds", name), memory: l.Memory}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		g.v2 = true
	}
	if err := g.make(l); err != nil {
		_ = g.Remove()
		return nil, fmt.Errorf("making the build's cgroup %s: %w", g.path, err)
	}
	return g, nil
}

// make creates the directories and writes the limits.
func (g *Cgroup) make(l StepLimits) error {
	if g.v2 {
		// Controllers reach a child only through each ancestor's
		// subtree_control.
		for _, d := range []string{cgroupRoot, filepath.Join(cgroupRoot, "bex-builds")} {
			if d != cgroupRoot {
				if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
			}
			if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +cpu +pids"), 0o644); err != nil {
				return fmt.Errorf("enabling the memory, cpu and pids controllers in %s: %w", d, err)
			}
		}
		dir := filepath.Join(cgroupRoot, g.path)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +cpu +pids"), 0o644); err != nil {
			return err
		}
		files := map[string]string{}
		if l.Memory > 0 {
			files["memory.max"] = strconv.FormatInt(l.Memory, 10)
			files["memory.swap.max"] = "0"
		}
		if l.CPUMilli > 0 {
			files["cpu.max"] = fmt.Sprintf("%d 100000", l.CPUMilli*100)
		}
		if l.Pids > 0 {
			files["pids.max"] = strconv.FormatInt(l.Pids, 10)
		}
		return writeAll(dir, files, "memory.max", "memory.swap.max")
	}
	type ctl struct {
		name  string
		files map[string]string
		order []string
	}
	ctls := []ctl{
		{name: "memory", files: map[string]string{}, order: []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}},
		{name: "cpu", files: map[string]string{}},
		{name: "pids", files: map[string]string{}},
	}
	if l.Memory > 0 {
		ctls[0].files["memory.limit_in_bytes"] = strconv.FormatInt(l.Memory, 10)
		if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes")); err == nil {
			ctls[0].files["memory.memsw.limit_in_bytes"] = strconv.FormatInt(l.Memory, 10)
		}
	}
	if l.CPUMilli > 0 {
		ctls[1].files["cpu.cfs_period_us"] = "100000"
		ctls[1].files["cpu.cfs_quota_us"] = strconv.FormatInt(l.CPUMilli*100, 10)
		ctls[1].order = []string{"cpu.cfs_period_us", "cpu.cfs_quota_us"}
	}
	if l.Pids > 0 {
		ctls[2].files["pids.max"] = strconv.FormatInt(l.Pids, 10)
	}
	for _, c := range ctls {
		root := filepath.Join(cgroupRoot, c.name)
		if _, err := os.Stat(root); err != nil {
			if len(c.files) == 0 {
				continue
			}
			return fmt.Errorf("the %s cgroup controller is not mounted at %s", c.name, root)
		}
		dir := filepath.Join(root, g.path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := writeAll(dir, c.files, c.order...); err != nil {
			return err
		}
	}
	return nil
}

// writeAll writes files into dir, those named in first first, in order.
func writeAll(dir string, files map[string]string, first ...string) error {
	write := func(name string) error {
		v, ok := files[name]
		if !ok {
			return nil
		}
		delete(files, name)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		return nil
	}
	for _, name := range first {
		if err := write(name); err != nil {
			return err
		}
	}
	for name := range files {
		if err := write(name); err != nil {
			return err
		}
	}
	return nil
}

// Parent is the value of the Dockerfile frontend's cgroup-parent option
// for the build.
func (g *Cgroup) Parent() string { return g.path }

// MemoryLimitReached reports whether the build's steps reached its memory
// limit. On cgroup v2 that is an OOM kill below the build's cgroup
// (memory.events counts those of its descendants). On cgroup v1 an OOM kill
// is counted only in the killed process's own cgroup, a step's, which runc
// removes with the step: there it is the build's peak use at the limit
// (memory.max_usage_in_bytes), which page cache alone may also reach; a
// caller confirms with the step's exit by SIGKILL.
func (g *Cgroup) MemoryLimitReached() bool {
	if g.memory <= 0 {
		return false
	}
	if g.v2 {
		return counter(filepath.Join(cgroupRoot, g.path, "memory.events"), "oom_kill") > 0
	}
	dir := filepath.Join(cgroupRoot, "memory", g.path)
	if counter(filepath.Join(dir, "memory.oom_control"), "oom_kill") > 0 {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.max_usage_in_bytes"))
	if err != nil {
		return false
	}
	peak, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return peak >= g.memory
}

// counter reads the value of key in a flat-keyed cgroup file ("oom_kill
// 3"), 0 when it is not there.
func counter(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// Remove removes the build's cgroup and what runc made below it for the
// steps, in every hierarchy of the machine (runc makes the path in each,
// not only in those with limits), once the steps' processes are gone; it
// waits a few seconds for the last of them to exit.
func (g *Cgroup) Remove() error {
	var last error
	for range 50 {
		last = nil
		dirs, err := filepath.Glob(filepath.Join(cgroupRoot, "*", g.path))
		if err != nil {
			return err
		}
		if g.v2 {
			dirs = append(dirs, filepath.Join(cgroupRoot, g.path))
		}
		for _, dir := range dirs {
			if err := removeTree(dir); err != nil {
				last = err
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing the build's cgroup %s: %w", g.path, last)
}

// removeTree removes the cgroup directory dir and those below it, deepest
// first (a cgroup directory goes with rmdir, not with its files).
func removeTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
