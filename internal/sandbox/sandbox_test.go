package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/test/platformtest"
)

// appDir is a release directory with the probe in it.
func appDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "release")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.BuildProbe(t, dir)
	return dir
}

// runToEnd runs spec's container until its process exits and returns
// what it printed and its exit error.
func runToEnd(t *testing.T, m *sandbox.Manager, spec sandbox.Spec) (string, *sandbox.Container, error) {
	t.Helper()
	c, err := m.Create(spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { c.Destroy() })
	var out bytes.Buffer
	cmd, err := c.Command()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting runc: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		c.Signal(syscall.SIGKILL)
		t.Fatalf("container did not exit; output:\n%s", out.String())
	}
	return out.String(), c, err
}

func wantLine(t *testing.T, out, line string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, line) {
			return
		}
	}
	t.Errorf("no line starting %q in:\n%s", line, out)
}

func TestFilesOfTheHostAreOutOfReach(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	dir := appDir(t)
	secret := filepath.Join(t.TempDir(), "operator-token")
	if err := os.WriteFile(secret, []byte("s3cr3t-operator-token"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: dir,
		Args: []string{"/app/probe", "read", secret, "/etc/shadow", "/proc/1/environ", "../../../../" + secret},
	})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("the tenant read the operator's token:\n%s", out)
	}
	wantLine(t, out, "read "+secret+": denied")
	wantLine(t, out, "read /etc/shadow: denied")

	out, _, err = runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: dir,
		Args: []string{"/app/probe", "write", "/usr/bin/evil", "/etc/passwd", "/app/new-file", "/tmp/scratch"},
	})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	wantLine(t, out, "write /usr/bin/evil: denied")
	wantLine(t, out, "write /etc/passwd: denied")
	wantLine(t, out, "write /app/new-file: ok")
	wantLine(t, out, "write /tmp/scratch: ok")
	if _, err := os.Stat(filepath.Join(dir, "new-file")); err == nil {
		t.Errorf("a write under /app reached the release directory, which other instances share")
	}
}

// TestHostnameResolvesToTheContainer: a container's own hostname is in its
// /etc/hosts, at its address, so looking it up asks no DNS server (which
// an app's network does not reach).
func TestHostnameResolvesToTheContainer(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	out, c, err := runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-7", AppDir: appDir(t),
		Args: []string{"/usr/bin/getent", "hosts", "web-7"},
	})
	if err != nil {
		t.Fatalf("getent hosts web-7: %v\n%s", err, out)
	}
	if f := strings.Fields(out); len(f) < 2 || f[0] != c.Addr().String() || f[1] != "web-7" {
		t.Errorf("getent hosts web-7 = %q, want %s web-7", out, c.Addr())
	}
}

func TestProcessesRunUnprivilegedInTheirTenantsRange(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	dir := appDir(t)
	a, err := m.HostUID("acme")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.HostUID("globex")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a < 65536 || b < 65536 {
		t.Fatalf("host uids of two tenants: %d and %d; want distinct unprivileged ranges", a, b)
	}
	out, _, err := runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: dir,
		Args: []string{"/app/probe", "read", "/proc/self/uid_map", "/proc/self/status"},
	})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	if !strings.Contains(out, fmt.Sprintf(`0 %10d      65536`, a)) && !strings.Contains(out, fmt.Sprintf(" %d ", a)) {
		t.Errorf("uid map does not map the tenant to its range starting at %d:\n%s", a, out)
	}
	for _, want := range []string{`Uid:\t1000\t1000\t1000\t1000`, `CapEff:\t0000000000000000`, `NoNewPrivs:\t1`, `Seccomp:\t2`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

func TestSeccompRefusesNamespacesAndMounts(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	dir := appDir(t)
	out, _, err := runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: dir,
		Args: []string{"/bin/sh", "-c", "unshare -Ur true; echo unshare=$?; mount -t tmpfs x /tmp 2>&1; echo mount=$?"},
	})
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	if !strings.Contains(out, "unshare=1") || strings.Contains(out, "mount=0") {
		t.Errorf("a tenant made a namespace or a mount:\n%s", out)
	}
}

func TestNetworkReachesNeitherHostNorOtherTenants(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	dir := appDir(t)
	// Services of the host: one on every address, one on loopback.
	any, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer any.Close()
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	for _, l := range []net.Listener{any, lo} {
		go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "platform") }))
	}
	anyPort := strconv.Itoa(any.Addr().(*net.TCPAddr).Port)
	loPort := strconv.Itoa(lo.Addr().(*net.TCPAddr).Port)

	// Another tenant's instance, serving.
	other, err := m.Create(sandbox.Spec{Tenant: "globex", Hostname: "web-0", AppDir: appDir(t), Args: []string{"/app/probe", "listen", ":5000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Destroy()
	cmd, err := other.Command()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Signal(syscall.SIGKILL); cmd.Wait() }()
	otherAddr := net.JoinHostPort(other.Addr().String(), "5000")
	// The platform (the edge) reaches it.
	platformtest.Eventually(t, 30*time.Second, "the host to reach an instance at "+otherAddr, func(context.Context) error {
		resp, err := http.Get("http://" + otherAddr + "/")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "hello from web-0") {
			t.Fatalf("the other tenant's instance answered %q", body)
		}
		return nil
	})

	targets := []string{
		net.JoinHostPort(m.Gateway().String(), anyPort),
		"127.0.0.1:" + loPort,
		"127.0.0.1:" + anyPort,
		otherAddr,
	}
	for _, a := range hostAddrs(t) {
		targets = append(targets, net.JoinHostPort(a, anyPort))
	}
	out, _, err := runToEnd(t, m, sandbox.Spec{Tenant: "acme", Hostname: "web-0", AppDir: dir, Args: append([]string{"/app/probe", "dial"}, targets...)})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	for _, a := range targets {
		wantLine(t, out, "dial "+a+": denied")
	}
}

// hostAddrs are the machine's own IPv4 addresses outside loopback.
func hostAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

func TestLimitsHoldAndTheHostStaysUp(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	dir := appDir(t)
	out, c, err := runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: dir,
		Args:   []string{"/app/probe", "alloc", "512"},
		Limits: sandbox.Limits{Memory: 64 << 20},
	})
	if err == nil || strings.Contains(out, "alloc: ok") {
		t.Errorf("an app allocated 512 MiB under a 64 MiB limit:\n%s", out)
	}
	if !c.OOMKilled() {
		t.Errorf("the container was not OOM-killed (exit: %v)", err)
	}

	out, _, err = runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: dir,
		Args:   []string{"/app/probe", "fork", "500"},
		Limits: sandbox.Limits{Pids: 64},
	})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	if !strings.Contains(out, "fork: stopped after") {
		t.Errorf("a fork bomb of 500 was not stopped by a pids limit of 64:\n%s", out)
	}

	out, _, err = runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: dir,
		Args:   []string{"/bin/sh", "-c", "head -c 20000000 /dev/zero > /tmp/big; echo tmp=$?; head -c 20000000 /dev/zero > /app/big; echo app=$?"},
		Limits: sandbox.Limits{Tmp: 8 << 20, AppWrites: 8 << 20},
	})
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	if !strings.Contains(out, "tmp=1") || !strings.Contains(out, "app=1") {
		t.Errorf("writes past the /tmp and /app limits succeeded:\n%s", out)
	}
}

// An image's own root filesystem (a Dockerfile build FROM scratch) runs as
// the container's root, unpacked wherever the platform keeps releases,
// even below a directory only root may enter.
func TestImageRootFilesystem(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	private := filepath.Join(t.TempDir(), "releases")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(private, "v1")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.BuildProbe(t, filepath.Join(rootfs, "bin"))
	if err := os.Symlink("/etc", filepath.Join(rootfs, "tmp")); err != nil {
		t.Fatal(err)
	}
	if c, err := m.Create(sandbox.Spec{Tenant: "acme", Hostname: "web-0", RootFS: rootfs, Args: []string{"/bin/probe", "read", "/etc/shadow"}}); err == nil {
		c.Destroy()
		t.Fatalf("an image whose /tmp links to the host's /etc was prepared")
	}
	if st, err := os.Stat("/etc"); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("the host's /etc changed mode: %v %v", st.Mode(), err)
	}
	if err := os.Remove(filepath.Join(rootfs, "tmp")); err != nil {
		t.Fatal(err)
	}
	out, _, err := runToEnd(t, m, sandbox.Spec{Tenant: "acme", Hostname: "web-0", RootFS: rootfs, Args: []string{"/bin/probe", "write", "/tmp/x", "/bin/evil"}})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	wantLine(t, out, "write /tmp/x: ok")
	wantLine(t, out, "write /bin/evil: denied")
}

// A slot's earlier holder can leave a veth port behind, its namespace not
// yet freed by the kernel when the next holder starts a container of the
// same name. The port is stale, and the container starts all the same.
func TestPortLeftByAnEarlierHolderDoesNotBlockAContainer(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	stale := sandbox.NextPortName(m)
	if out, err := exec.Command("ip", "link", "add", stale, "type", "veth", "peer", "name", stale+"p").CombinedOutput(); err != nil {
		t.Fatalf("adding a stale port %s: %v: %s", stale, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", stale).Run() })
	out, _, err := runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "web-0", AppDir: appDir(t),
		Args: []string{"/app/probe", "read", "/proc/self/status"},
	})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
}

// A build binds its work directory and its tenant's caches at their host
// paths, which name the tenant and the app. The mount points those binds
// need must not be seen by the next container, of another tenant.
func TestBindMountPointsStayWithTheirContainer(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	// Outside /tmp: below it, runc makes mount points in the container's
	// own tmpfs.
	parent, err := os.MkdirTemp("/var/tmp", "bex-binds-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	own := filepath.Join(parent, "tenant-acme", "app-shop")
	other := filepath.Join(parent, "tenant-globex", "app-secret-plans")
	for _, d := range []string{own, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := runToEnd(t, m, sandbox.Spec{
		Tenant: "globex", Hostname: "build", Binds: []sandbox.Bind{{Path: other}},
		Args: []string{"/bin/true"},
	})
	if err != nil {
		t.Fatalf("first build: %v\n%s", err, out)
	}
	out, _, err = runToEnd(t, m, sandbox.Spec{
		Tenant: "acme", Hostname: "build", Binds: []sandbox.Bind{{Path: own}},
		Args: []string{"/bin/ls", "-a", parent},
	})
	if err != nil {
		t.Fatalf("listing %s: %v\n%s", parent, err, out)
	}
	if strings.Contains(out, "globex") {
		t.Fatalf("a container of acme sees the mount point of globex's build:\n%s", out)
	}
	if !strings.Contains(out, "tenant-acme") {
		t.Fatalf("the container does not see its own bind's parent:\n%s", out)
	}
}

// A container's address may have been sent to before the container had
// it (the kernel sends the FINs of a gone instance's connections again for
// minutes): the host's neighbour entry for it is then resolving, and the
// first packets to the new container would wait for its next ARP request,
// up to a second. The entry must name the container as soon as it is
// made. Nor may the bridge's MAC change as containers come and go: that
// would flush the host's entries and leave the containers' for their
// gateway wrong.
func TestAddressSentToBeforeResolvesAtOnce(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	bridgeMAC := func() string {
		b, err := os.ReadFile("/sys/class/net/" + m.Bridge() + "/address")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	before := bridgeMAC()
	start := func(addr netip.Addr) {
		t.Helper()
		ct, err := m.Create(sandbox.Spec{Tenant: "acme", Hostname: "web-0", AppDir: appDir(t), Args: []string{"/app/probe", "listen", ":5000"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ct.Destroy() })
		if ct.Addr() != addr {
			t.Fatalf("the container got %s, want %s", ct.Addr(), addr)
		}
		if n := neighbour(t, m.Bridge(), addr.String()); !strings.Contains(n, "lladdr ") || strings.Contains(n, "INCOMPLETE") || strings.Contains(n, "FAILED") {
			t.Errorf("once the container is made, the host's neighbour entry for %s is %q, want its MAC", addr, n)
		}
		cmd, err := ct.Command()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ct.Signal(syscall.SIGKILL); cmd.Wait() })
		platformtest.Eventually(t, 30*time.Second, "the host to reach the container at "+addr.String(), func(context.Context) error {
			resp, err := http.Get("http://" + net.JoinHostPort(addr.String(), "5000") + "/")
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	}
	// The first address a new Manager gives, then the next.
	first := m.Gateway().Next()
	start(first)
	next := first.Next()
	c, err := net.Dial("udp", net.JoinHostPort(next.String(), "9"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("anyone?")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := neighbour(t, m.Bridge(), next.String()); !strings.Contains(n, "INCOMPLETE") {
		t.Fatalf("after a packet to %s with no container there, the host's neighbour entry is %q, want INCOMPLETE", next, n)
	}
	start(next)
	if after := bridgeMAC(); after != before {
		t.Errorf("the bridge's MAC went from %s to %s as containers were made", before, after)
	}
}

// neighbour is the host's neighbour entry for addr on dev, as ip shows it.
func neighbour(t *testing.T, dev, addr string) string {
	t.Helper()
	out, err := exec.Command("ip", "neigh", "show", addr, "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip neigh show %s dev %s: %v: %s", addr, dev, err, out)
	}
	return strings.TrimSpace(string(out))
}
