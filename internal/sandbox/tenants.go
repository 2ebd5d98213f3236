package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// tenantMap gives each tenant an index, and so a host uid range of its
// own, kept in a file when there is a state directory.
type tenantMap struct {
	mu    sync.Mutex
	path  string
	index map[string]int
}

func loadTenants(stateDir string) (*tenantMap, error) {
	t := &tenantMap{index: map[string]int{}}
	if stateDir == "" {
		return t, nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("making the sandbox's state directory: %w", err)
	}
	t.path = filepath.Join(stateDir, "sandbox-tenants.json")
	b, err := os.ReadFile(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &t.index); err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.path, err)
	}
	return t, nil
}

// of returns the tenant's index, giving it the next free one.
func (t *tenantMap) of(tenant string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.index[tenant]; ok {
		return i, nil
	}
	used := make(map[int]bool, len(t.index))
	for _, i := range t.index {
		used[i] = true
	}
	next := -1
	for i := range maxTenants {
		if !used[i] {
			next = i
			break
		}
	}
	if next < 0 {
		return 0, fmt.Errorf("no host uid range left for tenant %s: %d tenants run sandboxes on this platform", tenant, maxTenants)
	}
	t.index[tenant] = next
	if t.path != "" {
		b, err := json.Marshal(t.index)
		if err != nil {
			return 0, err
		}
		tmp := t.path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return 0, err
		}
		if err := os.Rename(tmp, t.path); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// HostUID returns the host uid that uid 0 of the tenant's containers maps
// to; the tenant's range is [HostUID, HostUID+65536).
func (m *Manager) HostUID(tenant string) (uint32, error) {
	i, err := m.tenants.of(tenant)
	if err != nil {
		return 0, err
	}
	return uint32(uidBase + m.slot*uidsPerSlot + i*uidsPerTenant), nil
}
