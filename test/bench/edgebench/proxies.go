package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"bex.co/bex/internal/kubebin"
)

// A proxy the edge is measured against: what a user of bex would put in
// front of an app instead. Each one gets the bench's listeners as file
// descriptors 3 (plain HTTP/1.1) and 4 (TLS, HTTP/1.1 and HTTP/2 offered,
// the certificate the local CA issued for tlsHost), forwards to the app
// over plain HTTP/1.1 with pooled keep-alive connections, writes no access
// log and logs only errors.
type proxy struct {
	// key names it on the command line and as a child process.
	key string
	// name is how scenarios and ratios call it.
	name string
	// find returns the binary to run: the pinned build (built when
	// missing) or the one on PATH.
	find func(ctx context.Context, o *options, b *kubebin.Builder) (string, error)
	// command returns what to run for p.
	command func(p proxySetup) (*exec.Cmd, []string, error)
}

// proxySetup is what a proxy's command is made from.
type proxySetup struct {
	bin       string
	dir       string // a directory of its own for config and state
	upstream  string // the app's address
	plain     string // the address of listener 3
	tls       string // the address of listener 4
	certFile  string
	keyFile   string
	procs     int      // GOMAXPROCS, worker processes or threads
	environ   []string // the bench's environment with GOMAXPROCS set
	adminSock string   // Caddy's admin socket, when its profile is wanted
}

// The proxies, in the order a round runs them.
const (
	proxyCaddy   = "caddy"
	proxyNginx   = "nginx"
	proxyHAProxy = "haproxy"
	proxyTraefik = "traefik"
)

func proxyTable() []proxy {
	return []proxy{
		{key: proxyCaddy, name: "Caddy", find: pinnedTool(kubebin.Caddy, func(o *options) string { return o.caddy }), command: caddyCommand},
		{key: proxyNginx, name: "nginx", find: onPath("nginx", "nginx", "/usr/sbin"), command: nginxCommand},
		{key: proxyHAProxy, name: "HAProxy", find: onPath("haproxy", "haproxy", "/usr/sbin"), command: haproxyCommand},
		{key: proxyTraefik, name: "Traefik", find: pinnedTool(kubebin.Traefik, func(*options) string { return "" }), command: traefikCommand},
	}
}

func proxyKeys() []string {
	var keys []string
	for _, p := range proxyTable() {
		keys = append(keys, p.key)
	}
	return keys
}

// selectedProxies returns the table's rows named in keys, in table order.
func selectedProxies(keys []string) ([]proxy, error) {
	var out []proxy
	for _, k := range keys {
		if !slices.Contains(proxyKeys(), k) {
			return nil, fmt.Errorf("--proxies: unknown proxy %q (known: %s)", k, strings.Join(proxyKeys(), ", "))
		}
	}
	for _, p := range proxyTable() {
		if slices.Contains(keys, p.key) {
			out = append(out, p)
		}
	}
	return out, nil
}

// pinnedTool finds a tool internal/kubebin builds, unless override names a
// binary.
func pinnedTool(name string, override func(*options) string) func(context.Context, *options, *kubebin.Builder) (string, error) {
	return func(ctx context.Context, o *options, b *kubebin.Builder) (string, error) {
		if bin := override(o); bin != "" {
			return bin, nil
		}
		bin, err := b.Tool(ctx, name)
		if err != nil {
			return "", fmt.Errorf("building %s: %w", name, err)
		}
		return bin, nil
	}
}

// onPath finds a command a Debian package installs, on PATH or in one of
// dirs: Debian installs nginx and HAProxy in /usr/sbin, which is on root's
// PATH but not on other users'.
func onPath(command, pkg string, dirs ...string) func(context.Context, *options, *kubebin.Builder) (string, error) {
	return func(context.Context, *options, *kubebin.Builder) (string, error) {
		if bin, err := exec.LookPath(command); err == nil {
			return bin, nil
		}
		for _, dir := range dirs {
			if bin, err := exec.LookPath(filepath.Join(dir, command)); err == nil {
				return bin, nil
			}
		}
		return "", fmt.Errorf("%s is not installed: install it (Debian: apt-get install %s; make bench-edge does as root) or leave it out with --proxies", command, pkg)
	}
}

func caddyCommand(p proxySetup) (*exec.Cmd, []string, error) {
	cfg, err := caddyConfig(p.upstream, p.certFile, p.keyFile, filepath.Join(p.dir, "storage"), p.adminSock)
	if err != nil {
		return nil, nil, err
	}
	file := filepath.Join(p.dir, "caddy.json")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		return nil, nil, err
	}
	environ := append(slices.Clone(p.environ), "HOME="+filepath.Join(p.dir, "home"),
		"XDG_DATA_HOME="+filepath.Join(p.dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(p.dir, "config"))
	return exec.Command(p.bin, "run", "--config", file), environ, nil
}

// nginxCommand runs nginx as deployed: a master and one worker per core,
// upstream keep-alive, the listeners inherited through the NGINX variable
// (nginx's own binary-upgrade hand-over), which match its listen lines.
func nginxCommand(p proxySetup) (*exec.Cmd, []string, error) {
	conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes %d;
pid %[2]s/nginx.pid;
error_log stderr error;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path %[2]s/body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	upstream app {
		server %[3]s;
		keepalive 64;
	}
	server {
		listen %[4]s;
		listen %[5]s ssl http2;
		ssl_certificate %[6]s;
		ssl_certificate_key %[7]s;
		ssl_protocols TLSv1.2 TLSv1.3;
		location / {
			proxy_pass http://app;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host $host;
		}
	}
}
`, p.procs, p.dir, p.upstream, p.plain, p.tls, p.certFile, p.keyFile)
	return configCommand(p, "nginx.conf", conf, func(file string) []string {
		return []string{"-p", p.dir, "-c", file, "-e", "stderr"}
	}, "NGINX=3;4;")
}

// haproxyCommand runs HAProxy in the foreground with one thread per core,
// on the inherited listeners (bind fd@N).
func haproxyCommand(p proxySetup) (*exec.Cmd, []string, error) {
	pem := filepath.Join(p.dir, "haproxy.pem")
	cert, err := os.ReadFile(p.certFile)
	if err != nil {
		return nil, nil, err
	}
	key, err := os.ReadFile(p.keyFile)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(pem, append(cert, key...), 0o600); err != nil {
		return nil, nil, err
	}
	conf := fmt.Sprintf(`global
	nbthread %d
	maxconn 8192
	log stderr format raw local0 err
defaults
	mode http
	log global
	timeout connect 5s
	timeout client 60s
	timeout server 60s
frontend plain
	bind fd@3
	default_backend app
frontend tls
	bind fd@4 ssl crt %s alpn h2,http/1.1
	default_backend app
backend app
	http-reuse always
	server app %s
`, p.procs, pem, p.upstream)
	return configCommand(p, "haproxy.cfg", conf, func(file string) []string {
		return []string{"-db", "-f", file}
	})
}

// traefikCommand runs Traefik with a file provider, on the inherited
// listeners through systemd socket activation (LISTEN_FDS, with the
// entry points' names in LISTEN_FDNAMES); a shell sets LISTEN_PID to its
// own pid and execs Traefik, which keeps it.
func traefikCommand(p proxySetup) (*exec.Cmd, []string, error) {
	type obj = map[string]any
	router := func(ep string, tls bool) obj {
		r := obj{"entryPoints": []string{ep}, "rule": "PathPrefix(`/`)", "service": "app"}
		if tls {
			r["tls"] = obj{}
		}
		return r
	}
	dynamic := obj{
		"http": obj{
			"routers":  obj{"plain": router("plain", false), "tls": router("tls", true)},
			"services": obj{"app": obj{"loadBalancer": obj{"servers": []obj{{"url": "http://" + p.upstream}}}}},
		},
		"tls": obj{"stores": obj{"default": obj{"defaultCertificate": obj{"certFile": p.certFile, "keyFile": p.keyFile}}}},
	}
	b, err := json.MarshalIndent(dynamic, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	// JSON is YAML; Traefik picks the format by the file's extension.
	file := filepath.Join(p.dir, "dynamic.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return nil, nil, err
	}
	args := []string{
		"--entryPoints.plain.address=:0", "--entryPoints.tls.address=:0",
		"--providers.file.filename=" + file, "--log.level=ERROR",
		"--global.checkNewVersion=false", "--global.sendAnonymousUsage=false",
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`, p.bin}, args...)...)
	environ := append(slices.Clone(p.environ), "LISTEN_FDS=2", "LISTEN_FDNAMES=plain:tls", "HOME="+p.dir)
	return cmd, environ, nil
}

// configCommand writes conf to name in p.dir, and returns p.bin with
// args(file) and p.environ with environ added.
func configCommand(p proxySetup, name, conf string, args func(file string) []string, environ ...string) (*exec.Cmd, []string, error) {
	file := filepath.Join(p.dir, name)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return nil, nil, err
	}
	return exec.Command(p.bin, args(file)...), append(slices.Clone(p.environ), environ...), nil
}
