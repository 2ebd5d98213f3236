package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"bex.co/bex/internal/sandbox"
)

// startSandboxedApp runs the app as make run runs a tenant's: in a runc
// container of a sandbox slot of its own, listening on its own address,
// which it returns. The container and the slot go with the environment.
func (env *environment) startSandboxedApp(progress io.Writer, self, dir string, gomaxprocs int) (string, error) {
	if err := sandbox.Check(""); err != nil {
		return "", fmt.Errorf("--sandbox: %w", err)
	}
	m, err := sandbox.New(sandbox.Options{StateDir: dir})
	if err != nil {
		return "", err
	}
	env.cleanups = append(env.cleanups, func() { _ = m.Close() })
	appDir := filepath.Join(dir, "app")
	if err := os.Mkdir(appDir, 0o755); err != nil {
		return "", err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(appDir, "edgebench"), b, 0o755); err != nil {
		return "", err
	}
	c, err := m.Create(sandbox.Spec{
		Tenant: "bench", Hostname: "web-0", AppDir: appDir,
		Args:   []string{"/app/edgebench", "app", "--listen", ":5000"},
		Env:    []string{"GOMAXPROCS=" + strconv.Itoa(gomaxprocs), "PATH=/usr/bin:/bin"},
		Limits: sandbox.Limits{Memory: 1 << 30, Pids: 1024},
	})
	if err != nil {
		return "", err
	}
	env.cleanups = append(env.cleanups, func() { _ = c.Destroy() })
	cmd, err := c.Command()
	if err != nil {
		return "", err
	}
	w := &prefixWriter{prefix: "[app] ", w: progress}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return "", err
	}
	ch := &child{name: "app", cmd: cmd, done: make(chan struct{}), pid: func() int {
		p, _ := c.PID()
		return p
	}}
	go func() {
		ch.err = cmd.Wait()
		close(ch.done)
	}()
	env.children = append(env.children, ch)
	addr := net.JoinHostPort(c.Addr().String(), "5000")
	fmt.Fprintf(progress, "The app runs in sandbox container %s at %s\n", c.ID(), addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return addr, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the sandboxed app does not listen at %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
