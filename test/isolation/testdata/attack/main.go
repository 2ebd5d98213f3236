// Command attack is a tenant's web app written to attack the platform it
// runs on. POST /attack/{group} with a plan (what the test knows: paths of
// the platform's files, its ports, the machine's addresses, another
// tenant's instance) runs each attempt of the group and answers a JSON list
// of {attempt, outcome, detail}: "blocked" when the attempt was stopped,
// "ok" when it got what it wanted. /whoami says where this instance listens,
// /oom allocates in the web process itself until the kernel kills it.
//
// "attack build PLAN" runs the groups the plan file names from a build
// step instead (testdata/buildattack), writing each result as a JSON line
// to its output, which is the build's log. Besides the app's groups it
// knows two that end the build: "oom" allocates the plan's memory in the
// process itself, "fill-disk" writes into the first fill target until a
// write fails, keeps what it wrote and exits 1.
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
	"slices"
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
	// Exhaust sizes the exhaust group past the limits of where it runs;
	// what it leaves zero goes past an app's.
	Exhaust sizes `json:"exhaust"`
	// Groups are what "attack build" runs, in order.
	Groups []string `json:"groups"`
}

type target struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Holds, for a directory, is a name the real one holds: a directory
	// of the same path without it (the parents of a sandbox's mount
	// points) is not the one sought.
	Holds string `json:"holds"`
}

// sizes are the exhaust group's attempts.
type sizes struct {
	// MemoryMiB is allocated in a child process [768].
	MemoryMiB int `json:"memoryMiB"`
	// Processes are started at once [400].
	Processes int `json:"processes"`
	// Files are opened at once [5000].
	Files int `json:"files"`
	// FillMiB is written into each of Fill [128]: files whose directory
	// should run out of room first [fill in $TMPDIR and in the working
	// directory].
	FillMiB int      `json:"fillMiB"`
	Fill    []target `json:"fill"`
}

func (s sizes) withDefaults() sizes {
	for _, d := range []struct {
		v   *int
		def int
	}{{&s.MemoryMiB, 768}, {&s.Processes, 400}, {&s.Files, 5000}, {&s.FillMiB, 128}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if len(s.Fill) == 0 {
		s.Fill = []target{{Name: "/tmp", Path: filepath.Join(os.TempDir(), "fill")}, {Name: "the app's directory", Path: "fill"}}
	}
	return s
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
	if len(os.Args) == 3 && os.Args[1] == "build" {
		os.Exit(build(os.Args[2], groups))
	}
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

// build runs the groups of the plan in file, writing each result as a JSON
// line, and says how to exit.
func build(file string, groups map[string]func(plan) []result) int {
	var p plan
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		fmt.Println("reading the plan:", err)
		return 2
	}
	report := func(rs ...result) {
		for _, r := range rs {
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
		}
	}
	for _, g := range p.Groups {
		switch g {
		case "oom":
			mib := p.Exhaust.withDefaults().MemoryMiB
			hog(mib)
			report(succeeded(fmt.Sprintf("allocate %d MiB in the build step itself", mib), "allocated and lived"))
		case "fill-disk":
			s := p.Exhaust.withDefaults()
			r := fillUp("fill "+s.Fill[0].Name+" and keep it", s.Fill[0].Path, s.FillMiB)
			report(r)
			if r.Outcome == "blocked" {
				return 1
			}
		default:
			run, ok := groups[g]
			if !ok {
				fmt.Println("unknown group", g)
				return 2
			}
			report(run(p)...)
		}
	}
	return 0
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
		out = append(out, readTarget("read "+f.Name+" ("+f.Path+")", f))
		out = append(out, readTarget("read "+f.Name+" through /proc/1/root", target{Path: "/proc/1/root" + f.Path, Holds: f.Holds}))
	}
	out = append(out, hostInit(p.HostPIDNamespace))
	out = append(out, environs(p.Markers))
	return out
}

// readTarget reads t's file, or lists t's directory.
func readTarget(attempt string, t target) result {
	fi, err := os.Stat(t.Path)
	if err != nil {
		return blocked(attempt, "%v", err)
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(t.Path)
		if err != nil {
			return blocked(attempt, "%v", err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if t.Holds != "" && !slices.Contains(names, t.Holds) {
			return blocked(attempt, "a directory of %d entries (%s) but no %s: the parents of this sandbox's mount points, not the one sought",
				len(names), strings.Join(names, " "), t.Holds)
		}
		return succeeded(attempt, "listed %d entries: %s", len(names), strings.Join(names, " "))
	}
	b, err := os.ReadFile(t.Path)
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
func exhaust(p plan) []result {
	s := p.Exhaust.withDefaults()
	out := []result{memory(s.MemoryMiB), pids(s.Processes), openFiles(s.Files)}
	for _, f := range s.Fill {
		out = append(out, fill("fill "+f.Name, f.Path, s.FillMiB))
	}
	return out
}

func memory(mib int) result {
	attempt := fmt.Sprintf("allocate %d MiB in a child process", mib)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/proc/self/exe", "memhog", strconv.Itoa(mib)).CombinedOutput()
	if err != nil {
		return blocked(attempt, "%v %s", err, bytes.TrimSpace(out))
	}
	return succeeded(attempt, "%s", bytes.TrimSpace(out))
}

func pids(want int) result {
	attempt := fmt.Sprintf("start %d processes", want)
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

func openFiles(want int) result {
	attempt := fmt.Sprintf("open %d files", want)
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

// fill writes want MiB to path in 1 MiB pieces, then removes it.
func fill(attempt, path string, want int) result {
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

// fillUp writes up to most MiB to path in 1 MiB pieces, stopping at the
// first write that fails, and keeps what it wrote.
func fillUp(attempt, path string, most int) result {
	dir, _ := filepath.Abs(filepath.Dir(path))
	attempt += " (" + dir + ")"
	f, err := os.Create(path)
	if err != nil {
		return blocked(attempt, "%v", err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n := range most {
		if _, err := f.Write(chunk); err != nil {
			return blocked(attempt, "after %d MiB: %v", n, err)
		}
	}
	return succeeded(attempt, "wrote %d MiB", most)
}
