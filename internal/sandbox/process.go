package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"bex.co/bex/internal/procstat"
)

// Process is a run of a container's process that outlives what started
// it, as a container runtime's shim makes it outlive the kubelet: runc
// runs it in the foreground under a shell of a session of its own (the
// shim), which writes the process's exit status into the container's
// directory when it ends. Its standard output and error go to two named
// pipes there; the shim holds each open for reading too, so that nothing
// the process writes while no one reads is lost or fails (up to the
// pipe's size; then the process's writes wait). Start makes one; Resume
// finds the one an earlier Manager of the same Owner started.
type Process struct {
	c              *Container
	stdout, stderr *os.File
	done           chan struct{}
	stop           chan struct{}
	stopOnce       sync.Once
}

// pipeSize is what the named pipes keep while no one reads them.
const pipeSize = 1 << 20

func (c *Container) path(name string) string { return filepath.Join(c.dir, name) }

// Start starts the container's process as a Process. A container on a
// terminal runs with Command instead.
func (c *Container) Start() (*Process, error) {
	if c.terminal != nil {
		return nil, errors.New("sandbox: a container on a terminal runs with Command")
	}
	if err := c.deleteRun(); err != nil {
		return nil, err
	}
	for _, f := range []string{"exit", "exit.new", "shim"} {
		if err := os.Remove(c.path(f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	var writers []*os.File
	defer func() {
		for _, w := range writers {
			w.Close()
		}
	}()
	for _, name := range []string{"stdout", "stderr"} {
		p := c.path(name)
		if err := syscall.Mkfifo(p, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("making the container's %s pipe: %w", name, err)
		}
		// Read and write, so that it opens at once and the pipe always
		// has a reader; blocking, as the shim's standard streams.
		fd, err := syscall.Open(p, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("opening the container's %s pipe: %w", name, err)
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, pipeSize)
		writers = append(writers, os.NewFile(uintptr(fd), p))
	}
	p := &Process{c: c, done: make(chan struct{}), stop: make(chan struct{})}
	if err := p.openPipes(); err != nil {
		return nil, err
	}
	// The exit status goes to "exit" at once, by rename, so that a
	// reader never sees half of it.
	const script = `"$@"; echo $? >exit.new && mv exit.new exit`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "bex-shim", c.m.opts.Runc}, c.m.runcArgs("run", "--keep", "--bundle", c.dir, c.id)...)...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = writers[0], writers[1]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		p.Close()
		return nil, fmt.Errorf("starting container %s: %w", c.id, err)
	}
	start, err := startTime(cmd.Process.Pid)
	if err == nil {
		err = writeFileAtomic(c.path("shim"), fmt.Appendf(nil, "%d %d\n", cmd.Process.Pid, start))
	}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	if err != nil {
		// Without its record the process could not be found again.
		_ = c.Signal(syscall.SIGKILL)
		<-p.done
		p.Close()
		return nil, fmt.Errorf("recording the shim of container %s: %w", c.id, err)
	}
	return p, nil
}

// Resume returns the process of a kept container (Manager.Kept) that
// Start started under an earlier Manager. If it has ended meanwhile, the
// Process is done and Wait says how it ended; an error means there is no
// Process to resume.
func (c *Container) Resume() (*Process, error) {
	b, err := os.ReadFile(c.path("shim"))
	if err != nil {
		return nil, fmt.Errorf("container %s has no process to resume: %w", c.id, err)
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &start); err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.path("shim"), err)
	}
	p := &Process{c: c, done: make(chan struct{}), stop: make(chan struct{})}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		if s, err := startTime(pid); err != nil || s != start {
			unix.Close(pidfd) // another process of the same pid
			pidfd = -1
		}
	} else {
		pidfd = -1
	}
	if pidfd < 0 {
		close(p.done)
		return p, nil
	}
	if err := p.openPipes(); err != nil {
		unix.Close(pidfd)
		return nil, err
	}
	go p.watch(pidfd)
	return p, nil
}

// watch closes done when the process of pidfd ends, or stops at Close.
func (p *Process) watch(pidfd int) {
	defer unix.Close(pidfd)
	for {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 500)
		if n > 0 || (err != nil && err != unix.EINTR) {
			close(p.done)
			return
		}
		select {
		case <-p.stop:
			return
		default:
		}
	}
}

// openPipes opens the reading ends of the process's output, not
// blocking: a reader sees the end once the shim and runc are gone.
func (p *Process) openPipes() error {
	var err error
	if p.stdout, err = os.OpenFile(p.c.path("stdout"), os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		return err
	}
	if p.stderr, err = os.OpenFile(p.c.path("stderr"), os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		p.stdout.Close()
		return err
	}
	return nil
}

// Stdout and Stderr are the process's output: what it wrote since the
// last reader stopped, then what it writes, until it ends (io.EOF).
func (p *Process) Stdout() io.Reader { return p.stdout }
func (p *Process) Stderr() io.Reader { return p.stderr }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process's end and returns its exit status as a
// shell has it (128+N for a process killed by signal N); -1 when nothing
// recorded it (the shim was killed), or when Close came first.
func (p *Process) Wait() int {
	select {
	case <-p.done:
	case <-p.stop:
		return -1
	}
	b, err := os.ReadFile(p.c.path("exit"))
	if err != nil {
		return -1
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return code
}

// Close stops reading the process's output and leaves it running: the
// pipes keep what it writes for the next reader (Resume).
func (p *Process) Close() {
	p.stopOnce.Do(func() {
		close(p.stop)
		for _, f := range []*os.File{p.stdout, p.stderr} {
			if f != nil {
				f.Close()
			}
		}
	})
}

// startTime is the start time of process pid in clock ticks since boot,
// which tells it from a later process of the same pid.
func startTime(pid int) (uint64, error) {
	f, err := procstat.Fields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[procstat.StartTime], 10, 64)
}
