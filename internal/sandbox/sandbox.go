package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Defaults of Options.
const (
	DefaultSubnet = "10.231.0.0/16"
	DefaultRunDir = "/run/bex-sandbox"
	// MaxSlots is how many Managers one machine runs at once.
	MaxSlots = 32
	// uidBase is the first host uid given to tenants; each slot has
	// uidsPerSlot of them, each tenant uidsPerTenant.
	uidBase       = 1 << 20
	uidsPerSlot   = 1 << 26
	uidsPerTenant = 1 << 16
	// maxTenants is how many tenants one slot maps.
	maxTenants = uidsPerSlot / uidsPerTenant
)

// Options configures a Manager. Zero fields take the defaults in brackets.
type Options struct {
	// Runc is the runc binary ["runc" on PATH].
	Runc string
	// Subnet is the pool the slots' /24s come from [10.231.0.0/16]. It must
	// be an IPv4 prefix of /16 to /19 that no route of the machine overlaps.
	Subnet string
	// RunDir holds the slots' locks, runc state, bundles and scratch mounts
	// [/run/bex-sandbox].
	RunDir string
	// StateDir, when set, keeps the tenants' uid ranges across restarts
	// (sandbox-tenants.json); without it they are given anew.
	StateDir string
	// ReadOnlyPaths are host directories that containers of the run base
	// see read-only at the same path: toolchains that releases were built
	// against (a Python installation outside /usr) and the platform's
	// binary directory (bex-static). /usr is always there.
	ReadOnlyPaths []string
	// Outbound lets containers open connections beyond the machine (NAT
	// through the host's default route). Connections to the host itself and
	// to other containers stay closed either way [off].
	Outbound bool
	// Owner, when set, is the path of a directory that keeps the slot for
	// one holder across Managers, as a node agent's state directory keeps
	// its containers across the agent's restarts: a Manager of the same
	// Owner claims the slot again and finds the containers an earlier one
	// left (Kept), and Managers of other owners leave the slot alone while
	// it holds containers and the Owner directory is there. Release gives
	// such a slot up with its containers running; Close removes them
	// [none: every claim of a slot starts it empty].
	Owner string
}

// Manager runs containers in its slot. It is safe for concurrent use.
type Manager struct {
	opts   Options
	slot   int
	lock   *os.File
	dir    string // RunDir/<slot>
	bridge string
	prefix netip.Prefix // the slot's /24
	gw     netip.Addr

	mu      sync.Mutex
	used    map[netip.Addr]bool
	last    netip.Addr
	tenants *tenantMap
	etc     string // the run base's /etc, written once
	closed  bool
	// kept are the containers an earlier Manager of the same Owner left,
	// until Kept hands them out.
	kept []*Container
}

// New checks that this machine can run sandboxes, claims a free slot,
// cleans what a dead holder of that slot left, and sets up its bridge and
// firewall. The error says what is missing and how to get it.
func New(opts Options) (*Manager, error) {
	if opts.Runc == "" {
		opts.Runc = "runc"
	}
	if opts.Subnet == "" {
		opts.Subnet = DefaultSubnet
	}
	if opts.RunDir == "" {
		opts.RunDir = DefaultRunDir
	}
	if err := Check(opts.Runc); err != nil {
		return nil, err
	}
	runc, err := exec.LookPath(opts.Runc)
	if err != nil {
		return nil, err
	}
	opts.Runc = runc
	pool, err := netip.ParsePrefix(opts.Subnet)
	if err != nil || !pool.Addr().Is4() || pool.Bits() < 16 || pool.Bits() > 19 {
		return nil, fmt.Errorf("invalid sandbox subnet %q: want an IPv4 prefix from /16 to /19, such as %s", opts.Subnet, DefaultSubnet)
	}
	pool = pool.Masked()
	// Traversable, not listable: runc, inside the container's user
	// namespace, reaches the root and the binds below it.
	if err := os.MkdirAll(opts.RunDir, 0o711); err != nil {
		return nil, fmt.Errorf("creating %s: %w", opts.RunDir, err)
	}
	if err := os.Chmod(opts.RunDir, 0o711); err != nil {
		return nil, err
	}
	slots := min(MaxSlots, 1<<(24-pool.Bits()))
	m := &Manager{opts: opts, used: map[netip.Addr]bool{}}
	keep := false
	if opts.Owner != "" {
		// The slot an earlier Manager of the owner held, first.
		for slot := range slots {
			if m.ownerOf(slot) != opts.Owner {
				continue
			}
			f, err := m.tryLock(slot)
			if err != nil {
				return nil, err
			}
			if f == nil {
				return nil, fmt.Errorf("sandbox slot %d of %s is held by another process (lock %s)", slot, opts.Owner, m.lockPath(slot))
			}
			m.slot, m.lock, keep = slot, f, true
			break
		}
	}
	for slot := 0; m.lock == nil && slot < slots; slot++ {
		if o := m.ownerOf(slot); o != "" && o != opts.Owner && m.holdsContainers(slot) && exists(o) {
			continue // kept for its owner
		}
		f, err := m.tryLock(slot)
		if err != nil {
			return nil, err
		}
		if f != nil {
			m.slot, m.lock = slot, f
		}
	}
	if m.lock == nil {
		return nil, fmt.Errorf("no free sandbox slot: %d platforms already run on this machine (locks in %s)", slots, opts.RunDir)
	}
	if err := m.setOwner(); err != nil {
		m.lock.Close()
		return nil, err
	}
	a := pool.Addr().As4()
	a[2] += byte(m.slot)
	m.prefix = netip.PrefixFrom(netip.AddrFrom4(a), 24)
	a[3] = 1
	m.gw = netip.AddrFrom4(a)
	m.bridge = "bex-" + strconv.Itoa(m.slot)
	m.dir = filepath.Join(opts.RunDir, strconv.Itoa(m.slot))
	m.tenants, err = loadTenants(opts.StateDir)
	if err != nil {
		m.lock.Close()
		return nil, err
	}
	if keep {
		err = m.resume()
	} else {
		err = m.setup()
	}
	if err != nil {
		m.teardown()
		m.lock.Close()
		return nil, err
	}
	return m, nil
}

// Check reports what this machine lacks to run sandboxes: root, runc, ip
// (iproute2), nft (nftables), user namespaces. New calls it; callers may
// call it first to explain themselves.
func Check(runc string) error {
	// Debian installs nft and runc for root, in directories on root's PATH
	// but not on other users'.
	return check(runc, os.Geteuid(), []string{"/usr/sbin", "/sbin"})
}

// check is Check for the effective user euid, whose PATH may lack
// rootDirs, the directories on root's PATH.
func check(runc string, euid int, rootDirs []string) error {
	if runc == "" {
		runc = "runc"
	}
	var missing []error
	if euid != 0 {
		missing = append(missing, errors.New("it runs as root (it creates network namespaces, a bridge, firewall rules and cgroups)"))
	}
	for _, tool := range []struct{ bin, pkg string }{{runc, "runc"}, {"ip", "iproute2"}, {"nft", "nftables"}} {
		if !installed(tool.bin, euid, rootDirs) {
			missing = append(missing, fmt.Errorf("%s is installed (apt-get install %s)", tool.bin, tool.pkg))
		}
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && string(b) == "0\n" {
		missing = append(missing, errors.New("user namespaces are enabled (sysctl user.max_user_namespaces)"))
	}
	if len(missing) == 0 {
		return nil
	}
	msg := "tenant sandboxes need that"
	for i, e := range missing {
		if i > 0 {
			msg += ";"
		}
		msg += " " + e.Error()
	}
	return errors.New(msg)
}

// installed reports whether bin is on PATH or, for a user other than root,
// in one of rootDirs: the sandbox runs as root, with root's PATH, so a
// program there is not missing, only out of this user's sight.
func installed(bin string, euid int, rootDirs []string) bool {
	if _, err := exec.LookPath(bin); err == nil {
		return true
	}
	if euid == 0 || strings.ContainsRune(bin, '/') {
		return false
	}
	for _, dir := range rootDirs {
		if _, err := exec.LookPath(filepath.Join(dir, bin)); err == nil {
			return true
		}
	}
	return false
}

// Slot is the slot the Manager holds; Bridge, Subnet and Gateway its network.
func (m *Manager) Slot() int            { return m.slot }
func (m *Manager) Bridge() string       { return m.bridge }
func (m *Manager) Subnet() netip.Prefix { return m.prefix }
func (m *Manager) Gateway() netip.Addr  { return m.gw }

// RuncVersion is what "runc --version" says of the runc the Manager runs
// ("1.1.5"), or "unknown".
func (m *Manager) RuncVersion() string {
	out, err := output(m.opts.Runc, "--version")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "runc version "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func (m *Manager) runcArgs(args ...string) []string {
	return append([]string{"--root", filepath.Join(m.dir, "runc")}, args...)
}

// Close removes every container of the slot, its network and firewall,
// and gives the slot up. Containers should be destroyed first; those that
// are not are killed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	err := m.teardown()
	if m.opts.Owner != "" {
		os.Remove(m.ownerPath(m.slot))
	}
	m.lock.Close()
	return err
}

// Release gives the slot up and leaves everything of it as it is: its
// containers run on, for the next Manager of the same Owner to find
// (Kept). Close after Release does nothing.
func (m *Manager) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	m.lock.Close()
}
