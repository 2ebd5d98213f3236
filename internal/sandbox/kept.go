package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// recordVersion is the version of the record a container keeps of itself
// (container.json in its directory), for a later Manager of the same
// Owner. A record of another version is not read: its container is
// removed.
const recordVersion = 1

// record is what a Manager needs of a container that an earlier one made.
type record struct {
	Version int        `json:"version"`
	ID      string     `json:"id"`
	Seq     uint64     `json:"seq"`
	Addr    netip.Addr `json:"addr"`
	HostIf  string     `json:"hostIf"`
	Cgroup  string     `json:"cgroup"`
	Limits  Limits     `json:"limits"`
}

func (c *Container) recordPath() string { return filepath.Join(c.dir, "container.json") }

// writeRecord writes the container's record, atomically.
func (c *Container) writeRecord(seq uint64) error {
	b, err := json.Marshal(record{Version: recordVersion, ID: c.id, Seq: seq, Addr: c.addr,
		HostIf: c.hostIf, Cgroup: c.cgroup, Limits: c.limits})
	if err != nil {
		return err
	}
	return writeFileAtomic(c.recordPath(), b)
}

// writeFileAtomic writes a small file by renaming a new one over it.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (m *Manager) lockPath(slot int) string {
	return filepath.Join(m.opts.RunDir, fmt.Sprintf("slot-%d.lock", slot))
}

func (m *Manager) ownerPath(slot int) string {
	return filepath.Join(m.opts.RunDir, fmt.Sprintf("slot-%d.owner", slot))
}

// ownerOf is the Owner of the slot's last holder, "" for none.
func (m *Manager) ownerOf(slot int) string {
	b, err := os.ReadFile(m.ownerPath(slot))
	if err != nil {
		return ""
	}
	return string(b)
}

// setOwner records the Manager's Owner as its slot's.
func (m *Manager) setOwner() error {
	if m.opts.Owner == "" {
		if err := os.Remove(m.ownerPath(m.slot)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileAtomic(m.ownerPath(m.slot), []byte(m.opts.Owner))
}

// holdsContainers reports whether the slot's directory holds containers.
func (m *Manager) holdsContainers(slot int) bool {
	entries, _ := os.ReadDir(filepath.Join(m.opts.RunDir, strconv.Itoa(slot), "instances"))
	return len(entries) > 0
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// tryLock takes the slot's lock; nil when another process holds it.
func (m *Manager) tryLock(slot int) (*os.File, error) {
	f, err := os.OpenFile(m.lockPath(slot), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// resume takes the slot over from an earlier Manager of the same Owner:
// it keeps the containers whose record it reads (their network, address
// and mounts) and removes the others, then makes what is missing of the
// slot's bridge, firewall and directories.
func (m *Manager) resume() error {
	entries, err := os.ReadDir(filepath.Join(m.dir, "instances"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	kept := map[string]bool{}
	var errs []error
	for _, e := range entries {
		c, err := m.readKept(e.Name())
		if err != nil {
			errs = append(errs, m.removeUnknown(e.Name()))
			continue
		}
		kept[c.id] = true
		m.kept = append(m.kept, c)
		m.used[c.addr] = true
		for {
			cur := instanceSeq.Load()
			if cur >= c.seq || instanceSeq.CompareAndSwap(cur, c.seq) {
				break
			}
		}
	}
	// runc containers of no directory.
	if ids, err := output(m.opts.Runc, m.runcArgs("list", "-q")...); err == nil {
		for _, id := range strings.Fields(ids) {
			if !kept[id] {
				errs = append(errs, run("", m.opts.Runc, m.runcArgs("delete", "-f", id)...))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing containers an earlier holder of slot %d left: %w", m.slot, err)
	}
	if etc := filepath.Join(m.dir, "base", "etc"); len(m.kept) > 0 {
		if _, err := os.Stat(etc); err == nil {
			// Kept containers see it: not written anew under them.
			m.etc = etc
		}
	}
	if _, err := os.Stat("/sys/class/net/" + m.bridge); err == nil {
		for _, d := range []string{filepath.Join(m.dir, "runc"), filepath.Join(m.dir, "instances")} {
			if err := os.MkdirAll(d, 0o711); err != nil {
				return err
			}
		}
		if err := run(m.firewall(), "nft", "-f", "-"); err != nil {
			return fmt.Errorf("installing the sandbox firewall: %w", err)
		}
		return nil
	}
	// The bridge is gone (the host restarted?): nothing kept works.
	for _, c := range m.kept {
		c.Destroy()
	}
	m.kept = nil
	return m.setup()
}

// readKept reads the record of the kept container id.
func (m *Manager) readKept(id string) (*Container, error) {
	c := &Container{m: m, id: id, dir: filepath.Join(m.dir, "instances", id)}
	b, err := os.ReadFile(c.recordPath())
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.recordPath(), err)
	}
	if r.Version != recordVersion || r.ID != id || !r.Addr.IsValid() || !m.prefix.Contains(r.Addr) {
		return nil, fmt.Errorf("%s is not a record of version %d of container %s", c.recordPath(), recordVersion, id)
	}
	c.addr, c.hostIf, c.cgroup, c.limits, c.seq = r.Addr, r.HostIf, r.Cgroup, r.Limits, r.Seq
	return c, nil
}

// removeUnknown removes a container directory without a record: its runc
// container, network namespace and mounts.
func (m *Manager) removeUnknown(id string) error {
	var errs []error
	if _, err := os.Stat(filepath.Join(m.dir, "runc", id)); err == nil {
		errs = append(errs, run("", m.opts.Runc, m.runcArgs("delete", "-f", id)...))
	}
	if _, err := os.Stat("/var/run/netns/" + id); err == nil {
		errs = append(errs, run("", "ip", "netns", "del", id))
	}
	dir := filepath.Join(m.dir, "instances", id)
	errs = append(errs, unmountUnder(dir), os.RemoveAll(dir))
	return errors.Join(errs...)
}

// Kept returns the containers an earlier Manager of the same Owner left
// (see Options.Owner), once: the caller keeps those it wants and
// Destroys the others. Their processes may run (Resume) or have ended.
func (m *Manager) Kept() []*Container {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.kept
	m.kept = nil
	return kept
}
