package sandbox

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Console is the master side of the terminal a container's process runs
// on: what is written to it is the process's input, what is read from it
// the process's output. Reads end with io.EOF once the process has exited.
//
// runc runs in the foreground on a terminal of this machine, which it
// relays to the container's own: it puts that terminal in raw mode, gives
// the container's its size at start and at each SIGWINCH, and the
// container's terminal does the line editing and echo.
type Console struct{ f *os.File }

// openConsole opens the terminal cmd (runc) runs on: a new session whose
// controlling terminal it is, on standard input, output and error.
func (c *Container) openConsole(cmd *exec.Cmd) error {
	c.closeConsole()
	fd, err := syscall.Open("/dev/ptmx", syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening a terminal: %w", err)
	}
	fail := func(what string, err error) error {
		syscall.Close(fd)
		return fmt.Errorf("%s a terminal: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlocking", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		return fail("naming", err)
	}
	// runc reads its initial size from it.
	ws := &unix.Winsize{Row: c.terminal.Rows, Col: c.terminal.Cols}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws); err != nil {
		return fail("sizing", err)
	}
	// Non-blocking, so that the runtime's poller serves it and Close
	// ends a Read in progress.
	if err := syscall.SetNonblock(fd, true); err != nil {
		return fail("setting up", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return fail("opening", err)
	}
	c.console, c.consoleTTY = os.NewFile(uintptr(fd), "console"), slave
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr.Setpgid = false
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	return nil
}

// Console returns the terminal of a container created with
// Spec.Terminal, once Command's process has started; this process's own
// hold on the terminal's other end goes, so that reads end when runc
// exits. It may be called once per Command; Destroy closes it.
func (c *Container) Console() (*Console, error) {
	if c.console == nil {
		return nil, errors.New("sandbox: the container has no terminal")
	}
	if c.consoleTTY != nil {
		c.consoleTTY.Close()
		c.consoleTTY = nil
	}
	return &Console{f: c.console}, nil
}

func (c *Container) closeConsole() {
	for _, f := range []*os.File{c.console, c.consoleTTY} {
		if f != nil {
			f.Close()
		}
	}
	c.console, c.consoleTTY = nil, nil
}

// Read reads the process's output; io.EOF once nothing holds the terminal
// any more.
func (t *Console) Read(p []byte) (int, error) {
	n, err := t.f.Read(p)
	// A master whose last slave closed answers EIO: the end.
	if errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

// Write writes the process's input, as typed.
func (t *Console) Write(p []byte) (int, error) { return t.f.Write(p) }

// Resize sets the terminal's size; runc passes it on to the container's,
// whose process gets SIGWINCH.
func (t *Console) Resize(size TerminalSize) error {
	raw, err := t.f.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	err = raw.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	})
	return cmp.Or(err, ioctlErr)
}

// Close closes the terminal: runc, and the process, see it hang up.
func (t *Console) Close() error { return t.f.Close() }

// SetTerminalSize sets the size the terminal of a container created with
// Spec.Terminal has when its next Command starts; Console's Resize changes
// it while the process runs.
func (c *Container) SetTerminalSize(size TerminalSize) error {
	if c.terminal == nil {
		return errors.New("sandbox: the container has no terminal")
	}
	b, err := os.ReadFile(c.configPath())
	if err != nil {
		return err
	}
	var cfg specs.Spec
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("reading the container's config: %w", err)
	}
	if cfg.Process == nil {
		return errors.New("sandbox: the container's config has no process")
	}
	cfg.Process.ConsoleSize = &specs.Box{Width: uint(size.Cols), Height: uint(size.Rows)}
	if err := c.writeConfig(&cfg); err != nil {
		return err
	}
	*c.terminal = size
	return nil
}
