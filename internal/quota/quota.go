package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/internal/store"
)

// Default quotas of a tenant the operator set none for.
const (
	DefaultApps             = 25
	DefaultRoutes           = 100
	DefaultConcurrentBuilds = 2
	DefaultRepoBytes        = 1 << 30
	DefaultBuildMinutes     = 1000
	DefaultConcurrentRuns   = 3
	DefaultInstances        = 50
	// DefaultMilliCPU is 16 CPUs: sixteen standard instances, or 64
	// starter ones.
	DefaultMilliCPU = 16000
	// DefaultMemoryBytes is 32 GiB: sixteen standard instances.
	DefaultMemoryBytes = 32 << 30
)

// Defaults are the platform's quotas for every tenant; the operator
// overrides them per tenant through the admin API.
type Defaults struct {
	store.Quotas
}

// NewDefaults returns the built-in defaults.
func NewDefaults() *Defaults {
	return &Defaults{store.Quotas{
		Apps: DefaultApps, Routes: DefaultRoutes, ConcurrentBuilds: DefaultConcurrentBuilds,
		RepoBytes: DefaultRepoBytes, BuildMinutes: DefaultBuildMinutes, ConcurrentRuns: DefaultConcurrentRuns,
		Instances: DefaultInstances, MilliCPU: DefaultMilliCPU, MemoryBytes: DefaultMemoryBytes,
	}}
}

// AddFlags binds the defaults to fs as --quota-*.
func (d *Defaults) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&d.Apps, "quota-apps", d.Apps, "Apps a tenant may have, unless the operator set its own quota")
	fs.IntVar(&d.Routes, "quota-routes", d.Routes, "Custom routes a tenant may have over all its apps, unless the operator set its own quota")
	fs.IntVar(&d.ConcurrentBuilds, "quota-concurrent-builds", d.ConcurrentBuilds, "Builds of one tenant that may run at once, unless the operator set its own quota")
	fs.Int64Var(&d.RepoBytes, "quota-repo-bytes", d.RepoBytes, "Bytes a tenant's git repositories may take on disk, unless the operator set its own quota")
	fs.IntVar(&d.BuildMinutes, "quota-build-minutes", d.BuildMinutes, "Build minutes a tenant may use per calendar month (UTC), unless the operator set its own quota")
	fs.IntVar(&d.ConcurrentRuns, "quota-concurrent-runs", d.ConcurrentRuns, "One-off runs (bex run) of one tenant that may run at once, unless the operator set its own quota")
	fs.IntVar(&d.Instances, "quota-instances", d.Instances, "Instances a tenant's apps may run together, over all their processes, unless the operator set its own quota")
	fs.Var(quantity{&d.MilliCPU, true}, "quota-cpu", "CPU a tenant's apps' instances may request together, each its plan's, in CPUs (\"16\", \"2500m\"), unless the operator set its own quota")
	fs.Var(quantity{&d.MemoryBytes, false}, "quota-memory", "Memory a tenant's apps' instances may request together, each its plan's, as a quantity (\"32Gi\", \"512Mi\"), unless the operator set its own quota")
}

// quantity is a flag that reads a Kubernetes quantity into millicores
// (milli) or bytes.
type quantity struct {
	dst   *int64
	milli bool
}

func (q quantity) String() string {
	if q.dst == nil {
		return ""
	}
	if q.milli {
		return resource.NewMilliQuantity(*q.dst, resource.DecimalSI).String()
	}
	return resource.NewQuantity(*q.dst, resource.BinarySI).String()
}

func (q quantity) Set(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil {
		if q.milli {
			return fmt.Errorf("%q is not a CPU quantity: give CPUs such as 16 or 2500m", s)
		}
		return fmt.Errorf("%q is not a memory quantity: give bytes such as 32Gi or 512Mi", s)
	}
	if v.Sign() < 0 {
		return fmt.Errorf("%s: must not be negative", s)
	}
	if q.milli {
		*q.dst = v.MilliValue()
	} else {
		*q.dst = v.Value()
	}
	return nil
}

func (q quantity) Type() string { return "quantity" }

// Validate checks the defaults.
func (d *Defaults) Validate() error {
	var errs []error
	for flag, v := range map[string]int64{
		"--quota-apps": int64(d.Apps), "--quota-routes": int64(d.Routes), "--quota-concurrent-builds": int64(d.ConcurrentBuilds),
		"--quota-repo-bytes": d.RepoBytes, "--quota-build-minutes": int64(d.BuildMinutes), "--quota-concurrent-runs": int64(d.ConcurrentRuns),
		"--quota-instances": int64(d.Instances), "--quota-cpu": d.MilliCPU, "--quota-memory": d.MemoryBytes,
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s %d: must not be negative", flag, v))
		}
	}
	return errors.Join(errs...)
}

// For returns the quotas of the tenant: the defaults with the operator's
// overrides.
func (d *Defaults) For(ctx context.Context, st *store.Store, tenantID string) (store.Quotas, error) {
	o, err := st.TenantQuotas(ctx, tenantID)
	if err != nil {
		return store.Quotas{}, err
	}
	return d.Quotas.With(o), nil
}

// BuildQuota returns what store.CreateBuild checks for the tenant at now:
// its concurrent builds and its build minutes of now's calendar month.
func (d *Defaults) BuildQuota(ctx context.Context, st *store.Store, tenantID string, now time.Time) (*store.BuildQuota, error) {
	q, err := d.For(ctx, st, tenantID)
	if err != nil {
		return nil, err
	}
	return &store.BuildQuota{ConcurrentBuilds: q.ConcurrentBuilds, BuildMinutes: q.BuildMinutes, Since: store.MonthStart(now)}, nil
}

// RepoQuota gives the git receiver each tenant's repository size quota
// (gitserver.Quota), by tenant name.
type RepoQuota struct {
	Defaults *Defaults
	Store    *store.Store
}

// RepoBytes returns how many bytes the tenant's repositories may take.
func (r RepoQuota) RepoBytes(ctx context.Context, tenant string) (int64, error) {
	t, err := r.Store.GetTenantByName(ctx, tenant)
	if err != nil {
		return 0, err
	}
	q, err := r.Defaults.For(ctx, r.Store, t.ID)
	if err != nil {
		return 0, err
	}
	return q.RepoBytes, nil
}
