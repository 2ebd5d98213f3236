package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// toolTimeout bounds one call of ip, nft or runc that should be quick.
const toolTimeout = 30 * time.Second

// run runs a tool and returns its error with its output.
func run(stdin string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// output runs a tool and returns its standard output.
func output(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// setup cleans what a dead holder of the slot left, then makes the
// slot's bridge, firewall and directories.
func (m *Manager) setup() error {
	if err := m.teardown(); err != nil {
		return fmt.Errorf("cleaning sandbox slot %d: %w", m.slot, err)
	}
	if err := m.checkRoutes(); err != nil {
		return err
	}
	if err := os.MkdirAll(m.dir, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(m.dir, 0o711); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(m.dir, "runc"), 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(m.dir, "instances"), 0o711); err != nil {
		return err
	}
	// The bridge's MAC is set, from its address as the containers' are:
	// otherwise the kernel gives it the lowest of its ports' and changes
	// it as ports come and go, which flushes the host's neighbour entries
	// for the containers and leaves theirs for the gateway wrong.
	if err := run("", "ip", "link", "add", m.bridge, "address", macOf(m.gw), "type", "bridge"); err != nil {
		return fmt.Errorf("creating bridge %s: %w", m.bridge, err)
	}
	disableIPv6(m.bridge)
	if err := run("", "ip", "addr", "add", netip.PrefixFrom(m.gw, 24).String(), "dev", m.bridge); err != nil {
		return err
	}
	if err := run("", "ip", "link", "set", m.bridge, "up"); err != nil {
		return err
	}
	if err := run(m.firewall(), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("installing the sandbox firewall: %w", err)
	}
	if m.opts.Outbound {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("turning IPv4 forwarding on for outbound traffic: %w", err)
		}
	}
	return nil
}

// table is the slot's nftables table.
func (m *Manager) table() string { return "bex_sandbox_" + fmt.Sprint(m.slot) }

// firewall is the slot's nftables table: nothing new from the bridge to the
// host, nothing between containers (the bridge's ports are isolated too),
// nothing from outside to containers, and beyond the machine only with
// Outbound.
func (m *Manager) firewall() string {
	t, br := m.table(), m.bridge
	out := "drop"
	nat := ""
	if m.opts.Outbound {
		out = "accept"
		nat = fmt.Sprintf(`
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %s oifname != "%s" masquerade
	}`, m.prefix, br)
	}
	return fmt.Sprintf(`table inet %[1]s
delete table inet %[1]s
table inet %[1]s {
	chain input {
		type filter hook input priority filter - 10; policy accept;
		iifname "%[2]s" ct state established,related accept
		iifname "%[2]s" drop
	}
	chain forward {
		type filter hook forward priority filter - 10; policy accept;
		iifname "%[2]s" oifname "bex-*" drop
		oifname "%[2]s" ct state established,related accept
		oifname "%[2]s" drop
		iifname "%[2]s" %[3]s
	}%[4]s
}
`, t, br, out, nat)
}

// checkRoutes refuses a slot subnet that a route of the machine overlaps.
func (m *Manager) checkRoutes() error {
	out, err := output("ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "broadcast" || dst == "local" || dst == "unicast" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if dst == "default" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		p, err := netip.ParsePrefix(dst)
		if err != nil || !p.Overlaps(m.prefix) {
			continue
		}
		return fmt.Errorf("the sandbox subnet %s (slot %d of %s) overlaps the route %q of this machine: choose another subnet (--sandbox-subnet)", m.prefix, m.slot, m.opts.Subnet, sc.Text())
	}
	return nil
}

// teardown removes everything of the slot: containers, network namespaces,
// scratch mounts, the bridge and the firewall table. It is what setup does
// first, for a slot whose last holder died.
func (m *Manager) teardown() error {
	var errs []string
	root := filepath.Join(m.dir, "runc")
	if ids, err := output(m.opts.Runc, m.runcArgs("list", "-q")...); err == nil {
		for _, id := range strings.Fields(ids) {
			if err := run("", m.opts.Runc, m.runcArgs("delete", "-f", id)...); err != nil {
				errs = append(errs, err.Error())
			}
		}
	} else if _, statErr := os.Stat(root); statErr == nil {
		errs = append(errs, err.Error())
	}
	if list, err := output("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(list, "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], m.bridge+"-") {
				if err := run("", "ip", "netns", "del", f[0]); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
	}
	if links, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, l := range links {
			if strings.HasPrefix(l.Name(), m.portPrefix()) {
				if err := deletePort(l.Name()); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
	}
	if err := unmountUnder(m.dir); err != nil {
		errs = append(errs, err.Error())
	}
	if err := os.RemoveAll(filepath.Join(m.dir, "instances")); err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := os.Stat("/sys/class/net/" + m.bridge); err == nil {
		if err := run("", "ip", "link", "del", m.bridge); err != nil {
			errs = append(errs, err.Error())
		}
	}
	_ = run(fmt.Sprintf("table inet %[1]s\ndelete table inet %[1]s\n", m.table()), "nft", "-f", "-")
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// portPrefix begins the name of every host veth port of the slot.
func (m *Manager) portPrefix() string { return fmt.Sprintf("bv%dx", m.slot) }

// portName is the host's end of the veth of the slot's container seq.
func (m *Manager) portName(seq uint64) string { return m.portPrefix() + fmt.Sprint(seq) }

// deletePort removes a host veth port, and with it its peer, if it is
// there.
func deletePort(name string) error {
	if name == "" {
		return nil
	}
	if _, err := os.Stat("/sys/class/net/" + name); err != nil {
		return nil
	}
	err := run("", "ip", "link", "del", name)
	if _, statErr := os.Stat("/sys/class/net/" + name); err != nil && statErr != nil {
		// Gone meanwhile: the kernel freed it with its peer's namespace.
		return nil
	}
	return err
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			return fmt.Errorf("unmounting %s: %w", p, err)
		}
	}
	return nil
}

// disableIPv6 turns IPv6 off on a host interface, so that no link-local
// address of the host is reachable from a container.
func disableIPv6(ifname string) {
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1\n"), 0o644)
}

// allocate takes a free address of the slot, the next after the last one
// given, so that an address is not given again soon after its container
// went (a peer may still hold it in a cache).
func (m *Manager) allocate() (netip.Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := m.gw.Next()
	a := m.last.Next()
	if !m.last.IsValid() || !m.prefix.Contains(a) || a.As4()[3] == 255 {
		a = first
	}
	for range 253 {
		if !m.used[a] {
			m.used[a], m.last = true, a
			return a, nil
		}
		if a = a.Next(); !m.prefix.Contains(a) || a.As4()[3] == 255 {
			a = first
		}
	}
	return netip.Addr{}, fmt.Errorf("no free sandbox address in %s: too many instances run on this platform", m.prefix)
}

func (m *Manager) release(a netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.used, a)
}

// macOf is the MAC of the slot's interface with IPv4 address a: locally
// administered, with a's four bytes.
func macOf(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("02:62:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// plumb gives the network namespace ns one veth port on the slot's
// bridge, isolated from the bridge's other ports, with address a.
func (m *Manager) plumb(ns, hostIf string, a netip.Addr) error {
	// The slot is this manager's alone: a port of its name is left from
	// an earlier holder whose namespace the kernel has not freed yet.
	if err := deletePort(hostIf); err != nil {
		return err
	}
	// Three runs of ip, each a batch: every process started costs 10 to
	// 20 ms on a busy machine, and a container is started for each
	// release's instance and each build step.
	// The container's MAC follows from its address, as Docker's do, so
	// that the host's neighbour cache is right for an address given again.
	mac := macOf(a)
	if err := run(fmt.Sprintf("netns add %s\nlink add %s type veth peer name eth0 address %s netns %s\n", ns, hostIf, mac, ns),
		"ip", "-batch", "-"); err != nil {
		return err
	}
	disableIPv6(hostIf)
	// Isolated on the bridge before the port goes up. The host's
	// neighbour entry for the address is set to the container's MAC at
	// once: an entry left resolving (INCOMPLETE) by packets to the
	// address before the container had it, such as the FINs the kernel
	// sends again for a connection whose instance went away, would hold
	// the first packets to the new container until its next ARP request,
	// up to a second later (a release's health check waited 0.3 to 1 s
	// in one push of three).
	if err := run(fmt.Sprintf("link set %s master %s\nlink set dev %s type bridge_slave isolated on\nlink set %s up\nneigh replace %s lladdr %s dev %s nud reachable\n",
		hostIf, m.bridge, hostIf, hostIf, a, mac, m.bridge),
		"ip", "-batch", "-"); err != nil {
		return err
	}
	batch := fmt.Sprintf("link set lo up\naddr add %s dev eth0\nlink set eth0 up\nroute add default via %s\n",
		netip.PrefixFrom(a, 24), m.gw)
	return run(batch, "ip", "-n", ns, "-batch", "-")
}
