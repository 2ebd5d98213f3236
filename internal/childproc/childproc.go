package childproc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options say what to start.
type Options struct {
	// Name names the process in errors.
	Name string
	// Args is the command line, the binary first.
	Args []string
	// LogFile receives the process's output, appended; it is created with
	// LogMode (0 means 0600).
	LogFile string
	LogMode os.FileMode
	// Env is the process's environment; nil means this process's.
	Env []string
}

// Process is one running child.
type Process struct {
	name, logFile string
	cmd           *exec.Cmd
	done          chan struct{}
	err           error // set before done closes
}

// Start starts the process with its output appended to its log, in its own
// process group, killed if this process dies.
func Start(o Options) (*Process, error) {
	mode := o.LogMode
	if mode == 0 {
		mode = 0o600
	}
	out, err := os.OpenFile(o.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, mode)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", o.Name, err)
	}
	cmd := exec.Command(o.Args[0], o.Args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = o.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Name, err)
	}
	p := &Process{name: o.Name, logFile: o.LogFile, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process exited; valid once Done is closed.
func (p *Process) Err() error { return p.err }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PID returns the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogFile is the path of the process's log.
func (p *Process) LogFile() string { return p.logFile }

// Stop sends SIGTERM to the process group, SIGKILL after grace, and waits
// for the process to exit.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	p.Terminate()
	p.WaitOrKill(grace)
}

// Terminate sends SIGTERM to the process group and returns: the start of
// a graceful stop that WaitOrKill ends. Send it once; many servers (every
// Kubernetes component) exit at once on a second SIGTERM.
func (p *Process) Terminate() {
	if !p.Exited() {
		_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	}
}

// WaitOrKill waits up to grace for the process to exit, then kills it
// (SIGKILL) and waits.
func (p *Process) WaitOrKill(grace time.Duration) {
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill sends SIGKILL to the process group and waits for the process.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.done
}

// WaitReady calls check every interval until it returns nil, the process
// exits, or ctx ends; the error names what is awaited and check's last
// error.
func (p *Process) WaitReady(ctx context.Context, what string, interval time.Duration, check func(context.Context) error) error {
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %v", what, errors.Join(p.err, last))
		case <-time.After(interval):
		}
	}
}

// Tail returns the last n lines of the process's log, or why it cannot be
// read.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.logFile)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a TCP port free on ip ("" means every address).
func FreePort(ip string) (int, error) {
	ports, err := FreePorts(ip, 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct TCP ports free on ip ("" means every
// address). Each port is held until all are picked: a port closed at once
// is free again, and the kernel may hand it out for the next pick.
//
// They are picked at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, from 32768 by default) when that leaves
// room: the kernel hands the ports of that range to every listener on
// port 0 and every outgoing connection, so a port picked there and closed
// could be another process's before the child binds it (a Cluster API
// manager once exited with "bind: address already in use" while other
// tests ran beside it).
func FreePorts(ip string, n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	low, high := belowEphemeral()
	for range n {
		l, err := listenBelow(ip, low, high)
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Where FreePorts picks: from firstPickedPort to the port below the
// ephemeral range, given at least minPickedPorts ports there.
const (
	firstPickedPort = 10000
	minPickedPorts  = 4096
	picksPerPort    = 64
)

// belowEphemeral returns the range of ports FreePorts picks from, or 0, 0
// when the ephemeral range leaves too few below it (or cannot be read).
func belowEphemeral() (low, high int) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first int
	if _, err := fmt.Sscan(string(data), &first); err != nil || first-firstPickedPort < minPickedPorts {
		return 0, 0
	}
	return firstPickedPort, first - 1
}

// listenBelow listens on ip at a random free port of [low, high], trying
// picksPerPort of them, then on a port the kernel chooses.
func listenBelow(ip string, low, high int) (net.Listener, error) {
	if high > low {
		for range picksPerPort {
			port := low + rand.IntN(high-low+1)
			if l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
				return l, nil
			}
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, fmt.Errorf("finding a free port on %q: %w", ip, err)
	}
	return l, nil
}
