package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// mount is a bind mount of a host path into a container.
type mount struct {
	dst, src string
	opts     []string
}

// topLinks are the top-level names of the host that the run base repeats:
// as the same link where the host has a link (merged /usr), else bound
// read-only.
var topLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// etcBinds are the host's /etc entries the run base shows read-only: the
// CA certificates and the alternatives' links (awk, …).
var etcBinds = []string{"ssl/certs", "alternatives"}

// baseEtc returns the run base's /etc, written once per Manager: an app
// user, no secrets of the host. Every container of the run base sees it
// read-only.
func (m *Manager) baseEtc() (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etc != "" {
		return m.etc, nil
	}
	base := filepath.Join(m.dir, "base")
	if err := os.RemoveAll(base); err != nil {
		return "", err
	}
	etc := filepath.Join(base, "etc")
	if err := writeEtc(etc); err != nil {
		return "", err
	}
	m.etc = etc
	return etc, nil
}

// makeRoot makes the root of one container of the run base at root: the
// empty mount points of the base and of the container's own binds, and the
// host's top-level links. Each container has its own, so that the mount
// points of one build (named after its tenant and app) are not seen by
// another.
func (m *Manager) makeRoot(root string, binds []Bind) error {
	dirs := []string{"usr", "etc", "app", "proc", "dev", "tmp"}
	for _, p := range append(etcBinds, m.extraPaths()...) {
		if !strings.HasPrefix(p, "/") {
			p = "/etc/" + p
		}
		if !strings.HasPrefix(p, "/usr/") {
			dirs = append(dirs, p)
		}
	}
	for _, b := range binds {
		p, err := bindMountPoint(b.target())
		if err != nil {
			return err
		}
		if p != "" {
			dirs = append(dirs, p)
		}
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o777|fs.ModeSticky); err != nil {
		return err
	}
	for _, name := range topLinks {
		host := "/" + name
		st, err := os.Lstat(host)
		if err != nil {
			continue
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				return err
			}
		} else if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// bindMountPoint checks a bind of the host path p and returns the mount
// point the container's root needs for it: "" below /tmp, where runc makes
// it in the container's own tmpfs.
func bindMountPoint(p string) (string, error) {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) || p == "/" {
		return "", fmt.Errorf("sandbox: bind %q is not an absolute path below /", p)
	}
	for _, reserved := range []string{"/usr", "/etc", "/proc", "/dev", "/app"} {
		if p == reserved || strings.HasPrefix(p, reserved+"/") {
			return "", fmt.Errorf("sandbox: bind %s would hide or enter %s", p, reserved)
		}
	}
	if p == "/tmp" {
		return "", fmt.Errorf("sandbox: bind %s would hide the container's /tmp", p)
	}
	if strings.HasPrefix(p, "/tmp/") {
		return "", nil
	}
	return p, nil
}

// extraPaths are Options.ReadOnlyPaths, cleaned, that exist.
func (m *Manager) extraPaths() []string {
	var out []string
	for _, p := range m.opts.ReadOnlyPaths {
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) || p == "/" {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

// writeEtc writes the run base's /etc.
func writeEtc(etc string) error {
	files := map[string]string{
		"passwd":        fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\napp:x:%d:%d:app:/app:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", AppUID, AppUID),
		"group":         fmt.Sprintf("root:x:0:\napp:x:%d:\nnogroup:x:65534:\n", AppUID),
		"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
		"resolv.conf":   "",
	}
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		files["resolv.conf"] = string(b)
	}
	for _, d := range append([]string{""}, etcBinds...) {
		if err := os.MkdirAll(filepath.Join(etc, d), 0o755); err != nil {
			return err
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// The dynamic loader's cache, so that libraries in the host's
	// multiarch directories are found as on the host.
	if b, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		if err := os.WriteFile(filepath.Join(etc, "ld.so.cache"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// baseMounts are the run base's read-only binds; baseEtc comes first.
func (m *Manager) baseMounts() []mount {
	ro := []string{"rbind", "ro", "nosuid", "nodev"}
	mounts := []mount{
		{dst: "/usr", src: "/usr", opts: ro},
		{dst: "/etc", src: m.etc, opts: ro},
	}
	for _, name := range topLinks {
		if st, err := os.Lstat("/" + name); err == nil && st.IsDir() {
			mounts = append(mounts, mount{dst: "/" + name, src: "/" + name, opts: ro})
		}
	}
	for _, p := range etcBinds {
		if _, err := os.Stat("/etc/" + p); err == nil {
			mounts = append(mounts, mount{dst: "/etc/" + p, src: "/etc/" + p, opts: ro})
		}
	}
	for _, p := range m.extraPaths() {
		if !strings.HasPrefix(p, "/usr/") {
			mounts = append(mounts, mount{dst: p, src: p, opts: ro})
		}
	}
	return mounts
}

// config is the container's OCI runtime configuration.
func (c *Container) config(spec Spec, root string, uid int, workDir string, hostUID uint32, binds []mount) *specs.Spec {
	l := c.limits
	none := []string{}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=1m"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=16m"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", l.Tmp)}},
	}
	for _, b := range binds {
		mounts = append(mounts, specs.Mount{Destination: b.dst, Type: "bind", Source: b.src, Options: b.opts})
	}
	memory := l.Memory
	pids := l.Pids
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &memory, Swap: &memory},
		Pids:   &specs.LinuxPids{Limit: pids},
		Devices: []specs.LinuxDeviceCgroup{
			{Allow: false, Access: "rwm"},
		},
	}
	if l.CPUMilli > 0 {
		period := uint64(100000)
		quota := l.CPUMilli * 100
		res.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	var console *specs.Box
	if spec.Terminal {
		console = &specs.Box{Width: uint(spec.TerminalSize.Cols), Height: uint(spec.TerminalSize.Rows)}
	}
	return &specs.Spec{
		Version: "1.0.2-dev",
		Process: &specs.Process{
			Terminal:        spec.Terminal,
			ConsoleSize:     console,
			User:            specs.User{UID: uint32(uid), GID: uint32(uid)},
			Args:            spec.Args,
			Env:             spec.Env,
			Cwd:             workDir,
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: none, Effective: none, Permitted: none, Inheritable: none, Ambient: none},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: l.Files, Soft: l.Files},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		Root:     &specs.Root{Path: root, Readonly: true},
		Hostname: spec.Hostname,
		Mounts:   mounts,
		Linux: &specs.Linux{
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: hostUID, Size: uidsPerTenant}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: hostUID, Size: uidsPerTenant}},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.UserNamespace},
				{Type: specs.CgroupNamespace},
				{Type: specs.NetworkNamespace, Path: "/var/run/netns/" + c.id},
			},
			CgroupsPath: c.cgroup,
			Resources:   res,
			Seccomp:     seccompProfile(),
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
			},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}
