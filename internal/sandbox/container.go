package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// AppDir is where a release's files are in a container of the run base.
const AppDir = "/app"

// AppPaths maps the host directory dir in v (a path, or a list of them
// joined with ":" as PATH is) to AppDir, where a container of the run base
// sees it.
func AppPaths(v, dir string) string {
	elems := strings.Split(v, ":")
	for i, e := range elems {
		if e == dir {
			elems[i] = AppDir
		} else if rest, ok := strings.CutPrefix(e, dir+"/"); ok {
			elems[i] = AppDir + "/" + rest
		}
	}
	return strings.Join(elems, ":")
}

// AppUID is the uid (and gid) processes run as in a container of the run
// base; the release's files belong to it.
const AppUID = 1000

// Limits bound one container. Zero fields take the defaults in brackets.
type Limits struct {
	// Memory is the memory limit in bytes, tmpfs pages included [512 MiB].
	Memory int64
	// CPUMilli is the CPU limit in thousandths of a core [none].
	CPUMilli int64
	// Pids bounds the processes and threads [256].
	Pids int64
	// Files bounds the open files of each process [4096].
	Files uint64
	// Tmp is the size of /tmp [64 MiB].
	Tmp int64
	// AppWrites bounds what processes may write under /app [64 MiB].
	AppWrites int64
}

func (l Limits) withDefaults() Limits {
	if l.Memory <= 0 {
		l.Memory = 512 << 20
	}
	if l.Pids <= 0 {
		l.Pids = 256
	}
	if l.Files == 0 {
		l.Files = 4096
	}
	if l.Tmp <= 0 {
		l.Tmp = 64 << 20
	}
	if l.AppWrites <= 0 {
		l.AppWrites = 64 << 20
	}
	return l
}

// Spec is what one container runs.
type Spec struct {
	// Tenant picks the host uid range.
	Tenant string
	// Hostname is the container's hostname.
	Hostname string
	// AppDir is a host directory seen at /app, over the run base; the
	// Manager gives its files to the tenant's app user. Or RootFS is the
	// whole root filesystem of an image, given to the tenant's root.
	AppDir, RootFS string
	// WorkDir is where the process starts [/app, or / for a RootFS].
	WorkDir string
	// Args is the process; Env its environment (KEY=value).
	Args []string
	Env  []string
	// Binds are host directories the container sees at their own path
	// (a build's work directory and its tenant's caches) or at their
	// Target (a Pod's emptyDir volumes).
	Binds []Bind
	// Limits bound it.
	Limits Limits
	// Terminal runs the process on a pseudo-terminal of the container's
	// own, of TerminalSize, whose input and output are Console's.
	Terminal     bool
	TerminalSize TerminalSize
}

// TerminalSize is the size of a container's terminal in characters.
type TerminalSize struct {
	Cols, Rows uint16
}

// Bind is a host directory seen in a container, at the same path unless
// Target says where.
type Bind struct {
	Path     string
	Target   string
	ReadOnly bool
}

// target is where the container sees the bind.
func (b Bind) target() string {
	if b.Target != "" {
		return b.Target
	}
	return b.Path
}

// Container is one prepared container: Command starts it, Destroy removes
// everything of it.
type Container struct {
	m      *Manager
	id     string
	dir    string
	addr   netip.Addr
	hostIf string
	cgroup string
	limits Limits
	// terminal, for a container that runs on one, is its size; console
	// and consoleTTY the master and the slave of the terminal runc runs
	// on, which runc relays to the container's own (runc.go).
	terminal            *TerminalSize
	console, consoleTTY *os.File
	seq                 uint64

	destroyOnce sync.Once
}

var instanceSeq atomic.Uint64

// Create prepares a container for spec: its network namespace and address,
// its scratch mounts and its OCI bundle. Nothing runs until Command's
// process starts.
func (m *Manager) Create(spec Spec) (_ *Container, err error) {
	if len(spec.Args) == 0 {
		return nil, errors.New("sandbox: no command to run")
	}
	if spec.AppDir != "" && spec.RootFS != "" {
		return nil, errors.New("sandbox: give an app directory or a root filesystem, not both")
	}
	if spec.RootFS != "" {
		for _, b := range spec.Binds {
			if err := rootFSTarget(b.target()); err != nil {
				return nil, err
			}
		}
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, errors.New("sandbox manager is closed")
	}
	hostUID, err := m.HostUID(spec.Tenant)
	if err != nil {
		return nil, err
	}
	seq := instanceSeq.Add(1)
	c := &Container{
		m:      m,
		id:     fmt.Sprintf("%s-%d", m.bridge, seq),
		limits: spec.Limits.withDefaults(),
		seq:    seq,
	}
	c.dir = filepath.Join(m.dir, "instances", c.id)
	c.cgroup = "/bex-sandbox/" + c.id
	defer func() {
		if err != nil {
			c.Destroy()
		}
	}()
	if err := os.Mkdir(c.dir, 0o711); err != nil {
		return nil, err
	}
	if c.addr, err = m.allocate(); err != nil {
		return nil, err
	}
	c.hostIf = m.portName(seq)
	if err := m.plumb(c.id, c.hostIf, c.addr); err != nil {
		return nil, fmt.Errorf("setting up the network of %s: %w", spec.Hostname, err)
	}
	var root string
	var mounts []mount
	user := AppUID
	workDir := spec.WorkDir
	if spec.RootFS == "" {
		if _, err := m.baseEtc(); err != nil {
			return nil, err
		}
		root = filepath.Join(c.dir, "root")
		if err := m.makeRoot(root, spec.Binds); err != nil {
			return nil, err
		}
		mounts = m.baseMounts()
		hosts, err := c.writeHosts(spec.Hostname)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, mount{dst: "/etc/hosts", src: hosts, opts: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
		mounts = append(mounts, bindMounts(spec.Binds)...)
		if spec.AppDir != "" {
			app, err := c.appOverlay(spec.AppDir, hostUID+AppUID)
			if err != nil {
				return nil, err
			}
			mounts = append(mounts, mount{dst: AppDir, src: app, opts: []string{"rbind", "rw", "nosuid", "nodev"}})
			if workDir == "" {
				workDir = AppDir
			}
		}
	} else {
		user = 0
		if err := prepareRootFS(spec.RootFS, hostUID); err != nil {
			return nil, err
		}
		// runc reaches the root from inside the user namespace: it goes
		// through the slot's directory, which that user may traverse,
		// wherever the image was unpacked.
		root = filepath.Join(c.dir, "rootfs")
		if err := os.Mkdir(root, 0o755); err != nil {
			return nil, err
		}
		if err := syscall.Mount(spec.RootFS, root, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return nil, fmt.Errorf("binding the image's root filesystem: %w", err)
		}
		// runc makes their mount points in the image's root.
		mounts = append(mounts, bindMounts(spec.Binds)...)
	}
	if workDir == "" {
		workDir = "/"
	}
	if err := c.writeConfig(c.config(spec, root, user, workDir, hostUID, mounts)); err != nil {
		return nil, err
	}
	if spec.Terminal {
		size := spec.TerminalSize
		c.terminal = &size
	}
	if err := c.writeRecord(seq); err != nil {
		return nil, err
	}
	return c, nil
}

// configPath is the container's OCI runtime config in its bundle.
func (c *Container) configPath() string { return filepath.Join(c.dir, "config.json") }

// writeConfig writes cfg as the container's OCI runtime config.
func (c *Container) writeConfig(cfg *specs.Spec) error {
	b, err := json.MarshalIndent(cfg, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(c.configPath(), b, 0o600)
}

// bindMounts are the mounts of binds.
func bindMounts(binds []Bind) []mount {
	var mounts []mount
	for _, b := range binds {
		opts := []string{"rbind", "rw", "nosuid", "nodev"}
		if b.ReadOnly {
			opts[1] = "ro"
		}
		mounts = append(mounts, mount{dst: b.target(), src: b.Path, opts: opts})
	}
	return mounts
}

// rootFSTarget checks where a container of an image's own root sees a
// bind: an absolute path below / that hides none of what the runtime
// mounts there.
func rootFSTarget(p string) error {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) || p == "/" {
		return fmt.Errorf("sandbox: bind target %q is not an absolute path below /", p)
	}
	for _, reserved := range []string{"/proc", "/dev", "/sys"} {
		if p == reserved || strings.HasPrefix(p, reserved+"/") {
			return fmt.Errorf("sandbox: bind target %s would hide or enter %s", p, reserved)
		}
	}
	return nil
}

// ID is the container's runc id.
func (c *Container) ID() string { return c.id }

// Addr is the container's address on the slot's bridge.
func (c *Container) Addr() netip.Addr { return c.addr }

// writeHosts writes the container's /etc/hosts, as container runtimes do:
// localhost, and its hostname at its address. Without the hostname a
// lookup of it goes to the DNS servers, which an app's network does not
// reach: Python's HTTPServer, which looks up its own name when it binds,
// waited 10 s for that before it listened.
func (c *Container) writeHosts(hostname string) (string, error) {
	content := "127.0.0.1\tlocalhost\n::1\tlocalhost\n"
	if hostname != "" {
		content += c.addr.String() + "\t" + hostname + "\n"
	}
	path := filepath.Join(c.dir, "hosts")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return "", fmt.Errorf("writing the container's /etc/hosts: %w", err)
	}
	return path, nil
}

// Command returns the command that runs the container in the foreground:
// runc's standard output and error are the process's, and it exits with
// the process's status. The caller sets Stdout and Stderr and starts it.
// The container is kept after its process exits, so that OOMKilled can
// read its cgroup; the next Command (a restart, in the same network
// namespace and with the same /app) or Destroy removes it.
func (c *Container) Command() (*exec.Cmd, error) {
	if err := c.deleteRun(); err != nil {
		return nil, err
	}
	cmd := exec.Command(c.m.opts.Runc, c.m.runcArgs("run", "--keep", "--bundle", c.dir, c.id)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c.terminal != nil {
		if err := c.openConsole(cmd); err != nil {
			return nil, err
		}
	}
	return cmd, nil
}

// deleteRun removes what runc keeps of the container's last run, killing
// what still runs of it; nothing when there was none.
func (c *Container) deleteRun() error {
	if _, err := os.Stat(filepath.Join(c.m.dir, "runc", c.id)); err != nil {
		return nil
	}
	return run("", c.m.opts.Runc, c.m.runcArgs("delete", "-f", c.id)...)
}

// PID is the host's process id of the container's first process, while
// it runs.
func (c *Container) PID() (int, error) {
	out, err := output(c.m.opts.Runc, c.m.runcArgs("state", c.id)...)
	if err != nil {
		return 0, err
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return 0, fmt.Errorf("reading runc state of %s: %w", c.id, err)
	}
	return st.Pid, nil
}

// Signal sends sig to every process of the container.
func (c *Container) Signal(sig syscall.Signal) error {
	return run("", c.m.opts.Runc, c.m.runcArgs("kill", "--all", c.id, strconv.Itoa(int(sig)))...)
}

// OOMKilled reports whether the kernel killed a process of the container
// for going past its memory limit. Call it after the process exited and
// before Destroy.
func (c *Container) OOMKilled() bool {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", c.cgroup, "memory.oom_control"))
	if err != nil {
		b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", c.cgroup, "memory.events"))
		if err != nil {
			return false
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" && f[1] != "0" {
			return true
		}
	}
	return false
}

// MemoryLimit is the container's memory limit in bytes.
func (c *Container) MemoryLimit() int64 { return c.limits.Memory }

// Destroy kills what still runs and removes the container, its network
// namespace, address and scratch mounts. It may be called more than once.
func (c *Container) Destroy() error {
	var err error
	c.destroyOnce.Do(func() {
		var errs []string
		c.closeConsole()
		if e := c.deleteRun(); e != nil {
			errs = append(errs, e.Error())
		}
		// The host's end goes first, and at once: the kernel frees a
		// network namespace's devices later, after its last user is gone,
		// and a port left behind would block its name for the next holder
		// of the slot.
		if e := deletePort(c.hostIf); e != nil {
			errs = append(errs, e.Error())
		}
		if _, statErr := os.Stat("/var/run/netns/" + c.id); statErr == nil {
			if e := run("", "ip", "netns", "del", c.id); e != nil {
				errs = append(errs, e.Error())
			}
		}
		if c.addr.IsValid() {
			c.m.release(c.addr)
		}
		if e := unmountUnder(c.dir); e != nil {
			errs = append(errs, e.Error())
		}
		if e := os.RemoveAll(c.dir); e != nil {
			errs = append(errs, e.Error())
		}
		if len(errs) > 0 {
			err = fmt.Errorf("removing container %s: %s", c.id, strings.Join(errs, "; "))
		}
	})
	return err
}

// appOverlay mounts the container's /app: the release's files (given to
// the tenant's app user) under a writable layer on a tmpfs of
// Limits.AppWrites, so that what the app writes stays its own, bounded,
// and goes with the container.
func (c *Container) appOverlay(lower string, uid uint32) (string, error) {
	if err := chownTree(lower, uid); err != nil {
		return "", fmt.Errorf("giving %s to the app user: %w", lower, err)
	}
	rw := filepath.Join(c.dir, "rw")
	app := filepath.Join(c.dir, "app")
	for _, d := range []string{rw, app} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
	}
	if err := syscall.Mount("tmpfs", rw, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", c.limits.AppWrites)); err != nil {
		return "", fmt.Errorf("mounting the app's scratch space: %w", err)
	}
	upper, work := filepath.Join(rw, "upper"), filepath.Join(rw, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := os.Chown(upper, int(uid), int(uid)); err != nil {
		return "", err
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	if err := syscall.Mount("overlay", app, "overlay", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return "", fmt.Errorf("mounting the app's overlay: %w", err)
	}
	return app, nil
}

// ChownTree gives every file under dir to the tenant's app user, as a
// container of the run base sees it: what a build's work directory and
// caches need before its steps run there.
func (m *Manager) ChownTree(tenant, dir string) error {
	hostUID, err := m.HostUID(tenant)
	if err != nil {
		return err
	}
	return walkChown(dir, hostUID+AppUID)
}

// chownTree gives every file under dir (links themselves, not what they
// name) to uid, unless dir already belongs to it.
func chownTree(dir string, uid uint32) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok && s.Uid == uid && s.Gid == uid {
		return nil
	}
	return walkChown(dir, uid)
}

// walkChown gives every file under dir to uid, links themselves.
func walkChown(dir string, uid uint32) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(uid), int(uid))
	})
}

// prepareRootFS gives an image's root filesystem to the tenant's root and
// makes the mount points the container needs, so that nothing is created
// in it from inside.
func prepareRootFS(root string, uid uint32) error {
	if err := chownTree(root, uid); err != nil {
		return fmt.Errorf("giving %s to the tenant: %w", root, err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, d := range []string{"proc", "dev", "tmp"} {
		if err := r.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("making /%s in the image: %w", d, err)
		}
	}
	// Through the root: an image's /tmp that is a link leads nowhere
	// outside it.
	return r.Chmod("tmp", 0o777|fs.ModeSticky)
}
