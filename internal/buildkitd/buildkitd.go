package buildkitd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"bex.co/bex/internal/childproc"
)

// Options configure a buildkitd.
type Options struct {
	// Dir holds the daemon's state (Dir/root: its snapshots and cache), its
	// configuration, its log (Dir/buildkitd.log) and its socket
	// (Dir/buildkitd.sock). It is created with mode 0700.
	Dir string
	// BuildKitd is the path of the buildkitd binary (kubebin.BuildKitd).
	BuildKitd string
	// Runc is the OCI runtime; empty means runc from PATH.
	Runc string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; zero
	// means 10 seconds.
	StopGrace time.Duration
}

// Daemon is a running buildkitd.
type Daemon struct {
	addr  string
	grace time.Duration
	proc  *childproc.Process
}

// Missing returns what this machine lacks to run buildkitd with runc, in a
// sentence that says how to get it, or "" when nothing is missing. runc is
// looked up in PATH when empty.
func Missing(runc string) string {
	var missing []string
	if uid := os.Geteuid(); uid != 0 {
		missing = append(missing, fmt.Sprintf("buildkitd runs as root and the platform runs as uid %d (start it as root)", uid))
	}
	if runc == "" {
		runc = "runc"
	}
	if _, err := exec.LookPath(runc); err != nil {
		missing = append(missing, fmt.Sprintf("its OCI runtime %s is not installed (apt-get install runc)", runc))
	}
	return strings.Join(missing, "; ")
}

// Start starts buildkitd and waits until its socket answers, or ctx ends.
// The daemon keeps running after ctx ends; Stop ends it. It is killed if
// this process dies.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.BuildKitd == "" {
		return nil, errors.New("buildkitd: the binary's path is empty")
	}
	if m := Missing(opts.Runc); m != "" {
		return nil, fmt.Errorf("cannot start buildkitd: %s", m)
	}
	runc := opts.Runc
	if runc == "" {
		runc = "runc"
	}
	runc, err := exec.LookPath(runc)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving the buildkitd directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the buildkitd directory: %w", err)
	}
	// The socket's directory is what keeps others out while buildkitd's
	// own mode (0660) is on the socket.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "buildkitd.toml")
	if err := os.WriteFile(conf, []byte(config(runc)), 0o600); err != nil {
		return nil, fmt.Errorf("writing the buildkitd configuration: %w", err)
	}
	sock := filepath.Join(dir, "buildkitd.sock")
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the old buildkitd socket: %w", err)
	}
	proc, err := childproc.Start(childproc.Options{
		Name: "buildkitd", LogFile: filepath.Join(dir, "buildkitd.log"),
		Args: []string{opts.BuildKitd,
			"--config", conf,
			"--root", filepath.Join(dir, "root"),
			"--addr", "unix://" + sock,
		},
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir},
	})
	if err != nil {
		return nil, err
	}
	d := &Daemon{addr: "unix://" + sock, grace: opts.StopGrace, proc: proc}
	if d.grace <= 0 {
		d.grace = 10 * time.Second
	}
	if err := d.wait(ctx, sock); err != nil {
		d.Stop()
		return nil, err
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		d.Stop()
		return nil, fmt.Errorf("restricting the buildkitd socket: %w", err)
	}
	return d, nil
}

// config is buildkitd's configuration: given explicitly, so that no
// /etc/buildkit/buildkitd.toml on the machine changes what runs. RUN steps
// default to the host's network namespace here; the builder runs every
// step of a tenant's Dockerfile in a namespace of its own with none
// (force-network-mode=none), so the default applies only to steps that ask
// for nothing else, which the builder never sends.
func config(runc string) string {
	return fmt.Sprintf(`# Written by bex on every start of buildkitd.
[worker.oci]
  enabled = true
  binary = %q
  networkMode = "host"
  gc = true

[worker.containerd]
  enabled = false
`, runc)
}

// wait polls the socket until it accepts a connection; buildkitd listens
// only once its worker is set up.
func (d *Daemon) wait(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := d.proc.WaitReady(ctx, "buildkitd", 100*time.Millisecond, func(context.Context) error {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%w; its log: %s\n%s", err, d.proc.LogFile(), d.proc.Tail(20))
	}
	return nil
}

// Addr is the daemon's address as buildctl --addr takes it:
// unix:///…/buildkitd.sock.
func (d *Daemon) Addr() string { return d.addr }

// Log is the path of the daemon's log.
func (d *Daemon) Log() string { return d.proc.LogFile() }

// Stop sends SIGTERM to the daemon's process group, SIGKILL after the grace
// period, and waits for it to exit.
func (d *Daemon) Stop() { d.proc.Stop(d.grace) }
