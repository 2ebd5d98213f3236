package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
)

// DefaultCertificateBudget is how many new hostnames one tenant's Routes
// get certificates for per BudgetWindow, unless the operator says
// otherwise (--certificate-budget of bex-edge and bex-embedded).
const DefaultCertificateBudget = 20

// BudgetWindow is the window a CertificateBudget counts over.
const BudgetWindow = time.Hour

// CertificateBudget bounds how many new hostnames each tenant's Routes get
// certificates for on demand: at most Names in any BudgetWindow. A wildcard
// Route obtains one certificate per name a client asks for, and every
// order counts against the platform's ACME account (Let's Encrypt allows
// 300 new orders per account every three hours), so one tenant must not be
// able to spend it for all.
//
// The ledger of each tenant, the names charged in the last window and
// when, is kept in the edge's shared storage under
// "bex/budget/<tenant>.json" and changed under the storage's lock
// "bex-certificate-budget-<tenant>", so that replicas share one budget. A
// name is charged once per window however often it is asked for, and a
// name whose certificate is in the storage is never charged (it is loaded,
// or renewed). A tenant found out of budget is remembered in memory until
// the window frees a place, so that a flood of invented names costs no
// storage round trip each.
//
// Its methods are safe for concurrent use.
type CertificateBudget struct {
	// Names is how many new names a tenant may get per BudgetWindow; it
	// must be positive.
	Names int
	// Storage is the edge's shared certmagic storage.
	Storage certmagic.Storage
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu        sync.Mutex
	exhausted map[string]spentBudget // tenant → until when it is out of budget
}

// spentBudget is what a process remembers of a tenant out of budget.
type spentBudget struct {
	until   time.Time
	charged []string
}

// budgetLedger is a tenant's ledger as stored.
type budgetLedger struct {
	Charged []budgetCharge `json:"charged"`
}

type budgetCharge struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

func budgetKey(tenant string) string {
	return path.Join("bex", "budget", certmagic.StorageKeys.Safe(tenant)+".json")
}

func budgetLock(tenant string) string {
	return "bex-certificate-budget-" + certmagic.StorageKeys.Safe(tenant)
}

func (b *CertificateBudget) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Spend charges name to tenant's budget and reports whether a certificate
// may be obtained for it: true when the name was already charged in the
// window or there is room; false with the time the oldest charge leaves
// the window when the budget is spent. It returns an error only when the
// storage cannot be read or written, and then nothing was charged.
func (b *CertificateBudget) Spend(ctx context.Context, tenant, name string) (bool, time.Time, error) {
	if b.Names <= 0 {
		return false, time.Time{}, errors.New("certificate budget: Names must be positive")
	}
	now := b.now()
	b.mu.Lock()
	if sp, ok := b.exhausted[tenant]; ok && now.Before(sp.until) {
		b.mu.Unlock()
		return slices.Contains(sp.charged, name), sp.until, nil
	}
	b.mu.Unlock()

	if err := b.Storage.Lock(ctx, budgetLock(tenant)); err != nil {
		return false, time.Time{}, fmt.Errorf("locking the certificate budget of %s: %w", tenant, err)
	}
	defer func() { _ = b.Storage.Unlock(context.WithoutCancel(ctx), budgetLock(tenant)) }()
	ledger, err := b.load(ctx, tenant)
	if err != nil {
		return false, time.Time{}, err
	}
	// The clock is read again: waiting for the lock may have taken long.
	now = b.now()
	ledger.Charged = slices.DeleteFunc(ledger.Charged, func(c budgetCharge) bool { return !now.Before(c.At.Add(BudgetWindow)) })
	if slices.ContainsFunc(ledger.Charged, func(c budgetCharge) bool { return c.Name == name }) {
		return true, time.Time{}, nil
	}
	if len(ledger.Charged) >= b.Names {
		until := ledger.Charged[len(ledger.Charged)-b.Names].At.Add(BudgetWindow)
		charged := make([]string, 0, len(ledger.Charged))
		for _, c := range ledger.Charged {
			charged = append(charged, c.Name)
		}
		b.mu.Lock()
		if b.exhausted == nil {
			b.exhausted = map[string]spentBudget{}
		}
		b.exhausted[tenant] = spentBudget{until: until, charged: charged}
		b.mu.Unlock()
		return false, until, nil
	}
	ledger.Charged = append(ledger.Charged, budgetCharge{Name: name, At: now.UTC()})
	data, err := json.Marshal(ledger)
	if err != nil {
		return false, time.Time{}, err
	}
	if err := b.Storage.Store(ctx, budgetKey(tenant), data); err != nil {
		return false, time.Time{}, fmt.Errorf("storing the certificate budget of %s: %w", tenant, err)
	}
	return true, time.Time{}, nil
}

// load reads tenant's ledger, oldest charge first; a tenant with none has
// an empty one.
func (b *CertificateBudget) load(ctx context.Context, tenant string) (budgetLedger, error) {
	var ledger budgetLedger
	data, err := b.Storage.Load(ctx, budgetKey(tenant))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ledger, nil
	case err != nil:
		return ledger, fmt.Errorf("loading the certificate budget of %s: %w", tenant, err)
	}
	if err := json.Unmarshal(data, &ledger); err != nil {
		return ledger, fmt.Errorf("decoding the certificate budget of %s: %w", tenant, err)
	}
	slices.SortStableFunc(ledger.Charged, func(a, c budgetCharge) int { return a.At.Compare(c.At) })
	return ledger, nil
}
