package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/kubebin"
)

// environment is the app, the edge and the proxies it is measured against,
// each in its own process, listening on loopback.
type environment struct {
	tls                 *tls.Config
	app                 string
	edgeHTTP, edgeHTTPS string
	proxies             []runningProxy
	// caddyAdmin is the unix socket of Caddy's admin endpoint; empty when off.
	caddyAdmin string
	children   []*child
	// cleanups run after the children are gone, last first.
	cleanups []func()
}

// runningProxy is a proxy started on its plain and TLS addresses.
type runningProxy struct {
	proxy
	http, https string
}

// startEnvironment starts the servers and waits until each answers, the
// edge over TLS included (its certificate is obtained then).
func startEnvironment(ctx context.Context, o *options, dir string, progress io.Writer) (_ *environment, err error) {
	proxies, err := selectedProxies(o.proxies)
	if err != nil {
		return nil, err
	}
	b, err := kubebin.NewBuilder(kubebin.Options{Progress: progress})
	if err != nil {
		return nil, err
	}
	bins := make([]string, len(proxies))
	for i, p := range proxies {
		if bins[i], err = p.find(ctx, o, b); err != nil {
			return nil, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ca, err := edge.LoadOrCreateLocalCA(filepath.Join(dir, "ca"))
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := issueProxyCert(ctx, ca, dir)
	if err != nil {
		return nil, err
	}

	env := &environment{tls: &tls.Config{RootCAs: ca.Pool(), ServerName: tlsHost, NextProtos: []string{"http/1.1"}}}
	defer func() {
		if err != nil {
			env.stop()
		}
	}()
	procsEnv := append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(o.gomaxprocs))

	ls, err := listen(3 + 2*len(proxies))
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	env.app, env.edgeHTTP, env.edgeHTTPS = addr(ls[0]), addr(ls[1]), addr(ls[2])

	if o.sandbox {
		if env.app, err = env.startSandboxedApp(progress, self, dir, o.gomaxprocs); err != nil {
			return nil, err
		}
	} else if err := env.start("app", progress, exec.Command(self, "app"), procsEnv, ls[0]); err != nil {
		return nil, err
	}
	edgeArgs := []string{"edge", "--ca-dir", filepath.Join(dir, "ca"), "--storage-dir", filepath.Join(dir, "edge-storage"),
		"--upstream", env.app, "--metrics=" + strconv.FormatBool(o.edgeMetrics)}
	if o.edgeProfile != "" {
		p, err := filepath.Abs(o.edgeProfile)
		if err != nil {
			return nil, err
		}
		edgeArgs = append(edgeArgs, "--cpuprofile", p)
	}
	if err := env.start("edge", progress, exec.Command(self, edgeArgs...), procsEnv, ls[1], ls[2]); err != nil {
		return nil, err
	}
	if o.caddyProfile != "" {
		env.caddyAdmin = filepath.Join(dir, "caddy-admin.sock")
	}
	var names []string
	for i, p := range proxies {
		plain, secure := ls[3+2*i], ls[4+2*i]
		pdir := filepath.Join(dir, p.key)
		if err := os.Mkdir(pdir, 0o755); err != nil {
			return nil, err
		}
		setup := proxySetup{bin: bins[i], dir: pdir, upstream: env.app, plain: addr(plain), tls: addr(secure),
			certFile: certFile, keyFile: keyFile, procs: o.gomaxprocs, environ: procsEnv}
		if p.key == proxyCaddy {
			setup.adminSock = env.caddyAdmin
		}
		cmd, environ, err := p.command(setup)
		if err != nil {
			return nil, fmt.Errorf("configuring %s: %w", p.name, err)
		}
		if err := env.start(p.key, progress, cmd, environ, plain, secure); err != nil {
			return nil, err
		}
		env.proxies = append(env.proxies, runningProxy{proxy: p, http: addr(plain), https: addr(secure)})
		names = append(names, fmt.Sprintf("%s (%s)", p.name, bins[i]))
	}

	fmt.Fprintf(progress, "Waiting for the app, the edge (obtaining its certificate) and %s\n", strings.Join(names, ", "))
	for _, sc := range env.scenarios([]body{{path: "/", size: len(smallBody)}}) {
		if err := env.waitReady(ctx, sc); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// body is one of the app's answers.
type body struct {
	path string
	size int
}

// scenario is one measured path to the app.
type scenario struct {
	name   string
	target target
	// proxy names the child in front of the app; empty for direct.
	proxy string
}

// The scenarios' names, without the body suffix; a proxy's are its name
// and " plain" or " TLS".
const (
	direct    = "direct"
	edgePlain = "edge plain"
	edgeTLS   = "edge TLS"
)

// scenarios returns the paths to the app for each body, in the order a
// round runs them: direct, the edge, then each proxy, plain and TLS.
func (env *environment) scenarios(bodies []body) []scenario {
	var out []scenario
	for _, b := range bodies {
		suffix := ""
		if b.path != "/" {
			suffix = " " + strings.TrimPrefix(b.path, "/")
		}
		t := func(addr, host string, c *tls.Config) target {
			return target{addr: addr, host: host, tls: c, path: b.path, size: b.size}
		}
		out = append(out,
			scenario{direct + suffix, t(env.app, tlsHost, nil), ""},
			scenario{edgePlain + suffix, t(env.edgeHTTP, plainHost, nil), "edge"},
			scenario{edgeTLS + suffix, t(env.edgeHTTPS, tlsHost, env.tls), "edge"},
		)
		for _, p := range env.proxies {
			out = append(out,
				scenario{p.name + " plain" + suffix, t(p.http, plainHost, nil), p.key},
				scenario{p.name + " TLS" + suffix, t(p.https, tlsHost, env.tls), p.key},
			)
		}
	}
	return out
}

// proxyNames returns the names of the proxies measured, in order.
func (env *environment) proxyNames() []string {
	var out []string
	for _, p := range env.proxies {
		out = append(out, p.name)
	}
	return out
}

// pids returns the processes a scenario runs on, by role.
func (env *environment) pids(sc scenario) map[string]int {
	pids := map[string]int{roleLoad: os.Getpid()}
	for _, c := range env.children {
		switch c.name {
		case "app":
			pids[roleApp] = c.cmd.Process.Pid
			if c.pid != nil {
				pids[roleApp] = c.pid()
			}
		case sc.proxy:
			pids[roleProxy] = c.cmd.Process.Pid
		}
	}
	return pids
}

// Roles of the processes in a scenario, for CPU accounting.
const (
	roleProxy = "proxy"
	roleApp   = "app"
	roleLoad  = "load generator"
)

func (env *environment) waitReady(ctx context.Context, sc scenario) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := probe(ctx, sc.target)
		if err == nil {
			return nil
		}
		for _, c := range env.children {
			if c.exited() {
				return fmt.Errorf("%s exited before %s answered: %v", c.name, sc.name, c.wait())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within 90 s: %w", sc.name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// child is one server process.
type child struct {
	name string
	cmd  *exec.Cmd
	// pid, when set, gives the process that does the work (a container's
	// init rather than runc).
	pid  func() int
	done chan struct{}
	err  error
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *child) wait() error {
	<-c.done
	return c.err
}

// start runs cmd as a server with the listeners as file descriptors 3, 4, …
// and its output prefixed with its name on progress.
func (env *environment) start(name string, progress io.Writer, cmd *exec.Cmd, environ []string, ls ...*net.TCPListener) error {
	cmd.Env = environ
	cmd.SysProcAttr = childProcAttr()
	w := &prefixWriter{prefix: "[" + name + "] ", w: progress}
	cmd.Stdout, cmd.Stderr = w, w
	for _, l := range ls {
		f, err := l.File()
		if err != nil {
			return err
		}
		defer f.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	env.children = append(env.children, c)
	return nil
}

// stop interrupts every child and waits for it (the edge writes its
// profile then), killing one that takes longer than 10 s.
func (env *environment) stop() {
	for _, c := range env.children {
		_ = c.cmd.Process.Signal(os.Interrupt)
	}
	for _, c := range env.children {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	env.children = nil
	for i := len(env.cleanups) - 1; i >= 0; i-- {
		env.cleanups[i]()
	}
	env.cleanups = nil
}

func listen(n int) ([]*net.TCPListener, error) {
	var ls []*net.TCPListener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, err
		}
		ls = append(ls, l.(*net.TCPListener))
	}
	return ls, nil
}

func addr(l net.Listener) string { return l.Addr().String() }

// prefixWriter writes each line with a prefix.
type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i]); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
}
