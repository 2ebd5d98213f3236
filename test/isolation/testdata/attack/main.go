// Command attack is a tenant's web app written to attack the platform it
// runs on. POST /attack/{group} with a plan (what the test knows: paths of
// the platform's files, its ports, the machine's addresses, another
// tenant's instance) runs each attempt of the group and answers a JSON list
// of {attempt, outcome, detail}: "blocked" when the attempt was stopped,
// "ok" when it got what it wanted. /whoami says where this instance listens,
// /oom allocates in the web process itself until the kernel kills it.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// plan is what the test hands the app.
type plan struct {
	// Files are paths of the platform's and other tenants' files.
	Files []target `json:"files"`
	// HostPIDNamespace is the host's /proc/self/ns/pid link.
	HostPIDNamespace string `json:"hostPIDNamespace"`
	// Markers are secrets of others (another tenant's env values) to look
	// for in every visible process's environment.
	Markers []string `json:"markers"`
	// Services are the platform's ports, dialled on every address.
	Services []service `json:"services"`
	// Addresses are the machine's own addresses.
	Addresses []target `json:"addresses"`
	// Peer is another tenant's instance, host:port.
	Peer string `json:"peer"`
	// SweepPorts are every port listening on the machine.
	SweepPorts []int `json:"sweepPorts"`
}

type target struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

type service struct {
	Name string `json:"name"`
	Port int    `json:"port"`
	// URL, when set, is asked once connected: scheme and path, with
	// the address and port filled in ("https://%s/health").
	URL string `json:"url"`
}

type result struct {
	Attempt string `json:"attempt"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

func blocked(attempt, format string, args ...any) result {
	return result{attempt, "blocked", fmt.Sprintf(format, args...)}
}

func succeeded(attempt, format string, args ...any) result {
	return result{attempt, "ok", fmt.Sprintf(format, args...)}
}

var boot = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

func main() {
	if len(os.Args) == 3 && os.Args[1] == "memhog" {
		mib, _ := strconv.Atoi(os.Args[2])
		hog(mib)
		fmt.Println("allocated", mib, "MiB")
		return
	}
	groups := map[string]func(plan) []result{"files": files, "network": network, "exhaust": exhaust}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	http.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"addr": net.JoinHostPort(ownAddress(), os.Getenv("PORT")), "boot": boot})
	})
	http.HandleFunc("/oom", func(w http.ResponseWriter, r *http.Request) {
		hog(1024)
		fmt.Fprint(w, "allocated 1024 MiB and lived")
	})
	http.HandleFunc("POST /attack/{group}", func(w http.ResponseWriter, r *http.Request) {
		run, ok := groups[r.PathValue("group")]
		var p plan
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || !ok {
			http.Error(w, "want POST /attack/{files,network,exhaust} with a JSON plan", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(run(p))
	})
	fmt.Println("attack app listening on", os.Getenv("PORT"))
	if err := http.ListenAndServe(":"+os.Getenv("PORT"), nil); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

// hog allocates mib MiB and touches every page.
var held [][]byte

func hog(mib int) {
	for range mib / 8 {
		b := make([]byte, 8<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
}

// ownAddress is the first IPv4 address of this network namespace that is
// not loopback.
func ownAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}

// files reads the platform's files, the host's init's environment and
// every other process's.
func files(p plan) []result {
	var out []result
	for _, f := range p.Files {
		out = append(out, readTarget("read "+f.Name+" ("+f.Path+")", f.Path))
		out = append(out, readTarget("read "+f.Name+" through /proc/1/root", "/proc/1/root"+f.Path))
	}
	out = append(out, hostInit(p.HostPIDNamespace))
	out = append(out, environs(p.Markers))
	return out
}

func readTarget(attempt, path string) result {
	fi, err := os.Stat(path)
	if err != nil {
		return blocked(attempt, "%v", err)
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return blocked(attempt, "%v", err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return succeeded(attempt, "listed %d entries: %s", len(names), strings.Join(names, " "))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return blocked(attempt, "%v", err)
	}
	return succeeded(attempt, "read %d bytes", len(b))
}

// hostInit reads /proc/1/environ; it is the host's init only when this
// process lives in the host's PID namespace.
func hostInit(hostNS string) result {
	const attempt = "read the host init's environment (/proc/1/environ)"
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		ns = "unknown (" + err.Error() + ")"
	}
	cmd, _ := os.ReadFile("/proc/1/cmdline")
	cmdline := strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	if ns != hostNS {
		return blocked(attempt, "this process is in PID namespace %s, not the host's %s: pid 1 is this container's own %q", ns, hostNS, cmdline)
	}
	env, err := os.ReadFile("/proc/1/environ")
	if err != nil {
		return blocked(attempt, "pid 1 is the host's %q but: %v", cmdline, err)
	}
	return succeeded(attempt, "pid 1 is the host's %q: read %d bytes of its environment", cmdline, len(env))
}

// environs reads every visible process's environment, looking for others'
// secrets.
func environs(markers []string) result {
	const attempt = "read other processes' environments (/proc/*/environ)"
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return blocked(attempt, "%v", err)
	}
	self := strconv.Itoa(os.Getpid())
	var visible, readable int
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
			continue
		}
		visible++
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || len(env) == 0 {
			continue
		}
		readable++
		for _, m := range markers {
			if m != "" && bytes.Contains(env, []byte(m)) {
				found = append(found, "pid "+e.Name())
			}
		}
	}
	if len(found) > 0 {
		return succeeded(attempt, "another tenant's secret in the environment of %s (%d processes visible, %d readable)", strings.Join(found, ", "), visible, readable)
	}
	return blocked(attempt, "%d other processes visible, %d environments readable, no secret of another tenant in them", visible, readable)
}

// network dials every service on every address, another tenant's
// instance, and every port of the machine.
func network(p plan) []result {
	addrs := []target{{Name: "127.0.0.1", Path: "127.0.0.1"}}
	if gw := gateway(); gw != "" {
		addrs = append(addrs, target{Name: "the gateway " + gw, Path: gw})
	}
	for _, a := range p.Addresses {
		addrs = append(addrs, target{Name: "the machine's " + a.Name, Path: a.Path})
	}
	type job struct {
		i    int
		name string
		addr string
		url  string
	}
	var jobs []job
	for _, a := range addrs {
		for _, s := range p.Services {
			jobs = append(jobs, job{name: s.Name + " on " + a.Name, addr: net.JoinHostPort(a.Path, strconv.Itoa(s.Port)), url: s.URL})
		}
	}
	if p.Peer != "" {
		jobs = append(jobs, job{name: "another tenant's instance directly", addr: p.Peer, url: "http://%s/whoami"})
	}
	out := make([]result, len(jobs)+len(addrs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { out[i] = dial("connect to "+j.name+" ("+j.addr+")", j.addr, j.url) })
	}
	for i, a := range addrs {
		wg.Go(func() { out[len(jobs)+i] = sweep(a, p.SweepPorts) })
	}
	wg.Wait()
	return out
}

func dial(attempt, addr, url string) result {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return blocked(attempt, "%v", err)
	}
	conn.Close()
	if url == "" {
		return succeeded(attempt, "connected")
	}
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get(fmt.Sprintf(url, addr))
	if err != nil {
		return succeeded(attempt, "connected; GET %s: %v", fmt.Sprintf(url, addr), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	return succeeded(attempt, "connected; GET %s answered %s %q", fmt.Sprintf(url, addr), resp.Status, body)
}

func sweep(a target, ports []int) result {
	attempt := fmt.Sprintf("connect to every port listening on the machine (%d) on %s", len(ports), a.Name)
	var mu sync.Mutex
	var open []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, port := range ports {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(a.Path, strconv.Itoa(port)), 2*time.Second)
			if err == nil {
				conn.Close()
				mu.Lock()
				open = append(open, strconv.Itoa(port))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(open) > 0 {
		return succeeded(attempt, "%d reachable: %s", len(open), strings.Join(open, " "))
	}
	return blocked(attempt, "none of %d reachable", len(ports))
}

// gateway is the default route's gateway from /proc/net/route.
func gateway() string {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil {
			continue
		}
		return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String()
	}
	return ""
}

// exhaust goes past each limit, bounded, and frees what it took.
func exhaust(plan) []result {
	return []result{memory(), pids(), openFiles(), fill("fill /tmp", filepath.Join(os.TempDir(), "fill")), fill("fill the app's directory", "fill")}
}

func memory() result {
	const attempt, mib = "allocate 768 MiB in a child process", 768
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/proc/self/exe", "memhog", strconv.Itoa(mib)).CombinedOutput()
	if err != nil {
		return blocked(attempt, "%v %s", err, bytes.TrimSpace(out))
	}
	return succeeded(attempt, "%s", bytes.TrimSpace(out))
}

func pids() result {
	const attempt, want = "start 400 processes", 400
	var procs []*exec.Cmd
	defer func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for len(procs) < want {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			return blocked(attempt, "process %d refused: %v", len(procs)+1, err)
		}
		procs = append(procs, c)
	}
	return succeeded(attempt, "%d processes started", len(procs))
}

func openFiles() result {
	const attempt, want = "open 5000 files", 5000
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	var fs []*os.File
	defer func() {
		for _, f := range fs {
			f.Close()
		}
	}()
	for len(fs) < want {
		f, err := os.Open("/dev/null")
		if err != nil {
			return blocked(attempt, "open %d refused (RLIMIT_NOFILE %d): %v", len(fs)+1, lim.Cur, err)
		}
		fs = append(fs, f)
	}
	return succeeded(attempt, "%d files open (RLIMIT_NOFILE %d)", len(fs), lim.Cur)
}

// fill writes 128 MiB to path in 1 MiB pieces, then removes it.
func fill(attempt, path string) result {
	const want = 128
	dir, _ := filepath.Abs(filepath.Dir(path))
	attempt += " (" + dir + ")"
	f, err := os.Create(path)
	if err != nil {
		return blocked(attempt, "%v", err)
	}
	defer os.Remove(path)
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n := range want {
		if _, err := f.Write(chunk); err != nil {
			return blocked(attempt, "after %d MiB: %v", n, err)
		}
	}
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return blocked(attempt, "sync after %d MiB: %v", want, err)
	}
	return succeeded(attempt, "wrote %d MiB", want)
}
