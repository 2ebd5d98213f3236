package clustermode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/build"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/kubeconfig"
	"bex.co/bex/internal/pipeline"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/store"
)

// RuntimeOptions are the flags of the release pipeline: the cluster
// releases run in, the registry images live in, the scratch directory, and
// the domain of apps' URLs.
type RuntimeOptions struct {
	// WorkloadKubeconfig is the kubeconfig of the cluster apps run in; empty
	// means the cluster the process runs in.
	WorkloadKubeconfig string
	// Registry is the host[:port] of the platform registry built images are
	// pushed to and the workload cluster pulls from.
	Registry string
	// WorkDir holds builds' work directories and caches, and the image
	// configuration the pipeline reads from each release's image.
	WorkDir string
	// AppDomain is the domain of apps' URLs, https://<app>-<tenant>.<domain>.
	AppDomain string
	// BuildKitAddr is the buildkitd Dockerfile builds go to (bex-git only).
	BuildKitAddr string
	// RunImage is the image built apps are laid on (bex-git only; see
	// build.Options.RunImage): the kube driver runs images as containers,
	// which need /bin/sh and the stacks' runtimes.
	RunImage string
	// MaxCheckoutBytes bounds what one build checks out of the pushed
	// commit (bex-git only; build.Options.MaxCheckoutBytes).
	MaxCheckoutBytes int64
	// Tenants is how the kube driver confines tenant namespaces.
	Tenants TenantOptions
	// Quotas are the tenants' default quotas the pipeline checks builds
	// against (bex-git binds their flags); nil means quota.NewDefaults().
	Quotas *quota.Defaults
	// ReleaseRetention is how many releases of an app keep their image
	// (pipeline.Options.ReleaseRetention); 0 means
	// pipeline.DefaultReleaseRetention. Every process that releases (the
	// git receiver, web) must be given the same.
	ReleaseRetention int
}

// TenantOptions are the flags of what the kube driver keeps in every tenant
// namespace (kube.Options' Network, TenantRole and PreparedNamespaces).
type TenantOptions struct {
	IngressNamespace string
	IngressPodLabels map[string]string
	IngressCIDRs     []string
	EgressCIDRs      []string
	// Role is bound to ServiceAccounts ("namespace/name") in each tenant
	// namespace of the workload cluster, ConfigRole in each of the
	// management cluster.
	Role            string
	ConfigRole      string
	ServiceAccounts []string
	// Prepared: this process may not prepare tenant namespaces, only check
	// them (bex-git).
	Prepared bool
}

func (o *TenantOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.IngressNamespace, "tenant-ingress-namespace", o.IngressNamespace, "Namespace of the pods (the edge's) that may connect to apps' web port; empty: none (each tenant namespace's NetworkPolicy)")
	fs.StringToStringVar(&o.IngressPodLabels, "tenant-ingress-pod-labels", o.IngressPodLabels, "Labels of the pods of --tenant-ingress-namespace that may connect to apps; empty: all of its pods")
	fs.StringSliceVar(&o.IngressCIDRs, "tenant-ingress-cidrs", o.IngressCIDRs, "CIDRs that may also connect to apps' web port (an edge outside the workload cluster)")
	fs.StringSliceVar(&o.EgressCIDRs, "tenant-egress-cidrs", o.EgressCIDRs, "CIDRs apps may connect to besides the cluster's DNS; empty: nothing")
	fs.StringVar(&o.Role, "tenant-role", o.Role, "ClusterRole bound in each tenant namespace to --tenant-role-service-accounts (the rights of a process that deploys without cluster-wide rights)")
	fs.StringVar(&o.ConfigRole, "tenant-config-role", o.ConfigRole, "ClusterRole bound in each tenant namespace of the management cluster to --tenant-role-service-accounts (reading the Secrets apps' env refers to)")
	fs.StringSliceVar(&o.ServiceAccounts, "tenant-role-service-accounts", o.ServiceAccounts, "ServiceAccounts (namespace/name) --tenant-role and --tenant-config-role are bound to in each tenant namespace")
	fs.BoolVar(&o.Prepared, "prepared-namespaces", o.Prepared, "Tenant namespaces are prepared by the controller manager: only check them before deploying (for a process without rights on namespaces)")
}

func (o *TenantOptions) validate() []error {
	var errs []error
	for flag, cidrs := range map[string][]string{"--tenant-ingress-cidrs": o.IngressCIDRs, "--tenant-egress-cidrs": o.EgressCIDRs} {
		for _, c := range cidrs {
			if _, err := netip.ParsePrefix(c); err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a CIDR (like 10.0.0.0/8)", flag, c))
			}
		}
	}
	if _, err := o.subjects(); err != nil {
		errs = append(errs, err)
	}
	if o.Role == "" && o.ConfigRole == "" && len(o.ServiceAccounts) > 0 {
		errs = append(errs, errors.New("--tenant-role-service-accounts needs --tenant-role or --tenant-config-role"))
	}
	return errs
}

func (o *TenantOptions) subjects() ([]rbacv1.Subject, error) {
	var subs []rbacv1.Subject
	for _, sa := range o.ServiceAccounts {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--tenant-role-service-accounts: %q is not namespace/name", sa)
		}
		subs = append(subs, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name})
	}
	return subs, nil
}

// KubeOptions are the kube driver's options from the flags (validated).
func (o *TenantOptions) KubeOptions() kube.Options {
	subs, _ := o.subjects()
	return kube.Options{
		Network: kube.TenantNetwork{
			IngressNamespace: o.IngressNamespace, IngressPodLabels: o.IngressPodLabels,
			IngressCIDRs: o.IngressCIDRs, EgressCIDRs: o.EgressCIDRs,
		},
		TenantRole: o.Role, TenantSubjects: subs, PreparedNamespaces: o.Prepared,
	}
}

// AddFlags binds the options to fs; withBuild adds --buildkit-addr and
// --run-image, which only the command that builds takes.
func (o *RuntimeOptions) AddFlags(fs *pflag.FlagSet, withBuild bool) {
	fs.StringVar(&o.WorkloadKubeconfig, "workload-kubeconfig", o.WorkloadKubeconfig, "Kubeconfig of the cluster apps run in (Deployments in the tenants' namespaces); empty: the cluster this runs in")
	fs.StringVar(&o.Registry, "registry", o.Registry, "host[:port] of the registry built images are pushed to and the workload cluster pulls from (required)")
	fs.StringVar(&o.WorkDir, "work-dir", o.WorkDir, "Scratch directory: build work trees and caches, images read back at release")
	fs.StringVar(&o.AppDomain, "app-domain", o.AppDomain, "Domain of the apps' URLs, https://<app>-<tenant>.<domain> (required)")
	fs.IntVar(&o.ReleaseRetention, "release-retention", cmp.Or(o.ReleaseRetention, pipeline.DefaultReleaseRetention), "Releases of an app that keep their image: older ones are pruned after each release or rollback and cannot be rolled back to (1 or more; the same for every process that releases)")
	o.Tenants.addFlags(fs)
	if withBuild {
		fs.StringVar(&o.BuildKitAddr, "buildkit-addr", o.BuildKitAddr, "Address of a buildkitd for Dockerfile builds (tcp://127.0.0.1:1234); empty refuses Dockerfiles")
		fs.Int64Var(&o.MaxCheckoutBytes, "max-checkout-bytes", o.MaxCheckoutBytes, "Largest size the pushed tree may check out to in a build; a larger one fails the build saying so (0: 512 MiB)")
		fs.StringVar(&o.RunImage, "run-image", o.RunImage, "Run image: the base built apps are laid on and run from as containers, with /bin/sh and the stacks' runtimes; of an index, linux/<this machine's architecture> (required; docs/builds.md)")
	}
}

// Validate returns what is wrong with the options.
func (o *RuntimeOptions) Validate() []error {
	var errs []error
	if o.Registry == "" {
		errs = append(errs, errors.New("--registry is required: built images are pushed there and pulled from there"))
	} else if _, err := name.NewRegistry(o.Registry); err != nil {
		errs = append(errs, fmt.Errorf("--registry %q: %w", o.Registry, err))
	}
	if o.WorkDir == "" {
		errs = append(errs, errors.New("--work-dir is empty"))
	}
	if o.AppDomain == "" {
		errs = append(errs, errors.New("--app-domain is required: apps' URLs are https://<app>-<tenant>.<domain>"))
	}
	if o.ReleaseRetention < 1 {
		errs = append(errs, fmt.Errorf("--release-retention %d: want 1 or more, the releases of an app kept for rollbacks (the one serving is always kept)", o.ReleaseRetention))
	}
	return append(errs, o.Tenants.validate()...)
}

// ValidateBuild returns what is wrong with the options of the command that
// builds: the kube driver runs built images as containers, which cannot
// start without a run image, so --run-image is required.
func (o *RuntimeOptions) ValidateBuild() []error {
	if o.MaxCheckoutBytes < 0 {
		return []error{fmt.Errorf("--max-checkout-bytes %d: must not be negative", o.MaxCheckoutBytes)}
	}
	if o.RunImage == "" {
		return []error{errors.New("--run-image is required: apps run as containers of the built image, which needs a base with /bin/sh and the stacks' runtimes (docs/builds.md, \"The run image\")")}
	}
	if _, err := name.ParseReference(o.RunImage); err != nil {
		return []error{fmt.Errorf("--run-image %q: %w", o.RunImage, err)}
	}
	return nil
}

// Runtime is the release side of a cluster deployment: the kube driver for
// the workload cluster and the pipeline over it.
type Runtime struct {
	Driver   *kube.Driver
	Pipeline *pipeline.Pipeline

	kube       client.Client
	configRole string
	subjects   []rbacv1.Subject
}

// NewRuntime builds the kube driver for the workload cluster and the
// pipeline that records builds and releases in st and App status through
// kubeClient (the management cluster).
//
// pipeline.New requires a builder even where nothing is built (the
// controller manager, bex-web): one is created on WorkDir and never called
// there; it needs git on PATH. Those commands have no --run-image, so their
// builder has none.
func (o *RuntimeOptions) NewRuntime(st *store.Store, kubeClient client.Client, log logr.Logger) (*Runtime, error) {
	cfg, err := kubeconfig.Load(o.WorkloadKubeconfig, "workload cluster")
	if err != nil {
		return nil, err
	}
	driver, err := kube.New(cfg, o.Tenants.KubeOptions())
	if err != nil {
		return nil, err
	}
	builder, err := build.New(build.Options{
		WorkRoot: filepath.Join(o.WorkDir, "build"), Registry: o.Registry, BuildKitAddr: o.BuildKitAddr,
		RunImage: o.RunImage, MaxCheckoutBytes: o.MaxCheckoutBytes, Log: log.WithName("builder"),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the builder: %w", err)
	}
	domain := o.AppDomain
	pl, err := pipeline.New(pipeline.Options{
		Store: st, Kube: kubeClient, Builder: builder, Runtime: driver,
		ReleasesDir: filepath.Join(o.WorkDir, "releases"),
		URL:         func(tenant, app string) string { return "https://" + edge.Hostname(tenant, app, domain) },
		Log:         log.WithName("pipeline"), Quotas: o.Quotas, ReleaseRetention: o.ReleaseRetention,
	})
	if err != nil {
		return nil, err
	}
	subjects, _ := o.Tenants.subjects()
	return &Runtime{Driver: driver, Pipeline: pl, kube: kubeClient, configRole: o.Tenants.ConfigRole, subjects: subjects}, nil
}

// Releases is the App controller's view of the pipeline in a cluster.
type Releases struct {
	*pipeline.Pipeline
	Driver runtime.Driver
	// Kube, ConfigRole and Subjects: PrepareNamespace binds ConfigRole to
	// Subjects in the tenant's namespace of the management cluster.
	Kube       client.Client
	ConfigRole string
	Subjects   []rbacv1.Subject
}

var (
	_ appctrl.Releases          = Releases{}
	_ appctrl.NamespacePreparer = Releases{}
)

// PrepareNamespace implements appctrl.NamespacePreparer: the kube driver's
// (namespace labels, NetworkPolicy and role binding in the workload
// cluster), then the binding of ConfigRole in the tenant's namespace of the
// management cluster, where the Secrets of its Apps' env are.
func (r Releases) PrepareNamespace(ctx context.Context, tenant string) error {
	if p, ok := r.Driver.(appctrl.NamespacePreparer); ok {
		if err := p.PrepareNamespace(ctx, tenant); err != nil {
			return err
		}
	}
	if r.ConfigRole == "" || r.Kube == nil {
		return nil
	}
	rb := kube.TenantRoleBinding(ConfigRoleBindingName, tenant, tenant, r.ConfigRole, r.Subjects)
	if err := r.Kube.Apply(ctx, rb, client.FieldOwner(kubeapply.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying role binding %s/%s: %w", tenant, ConfigRoleBindingName, err)
	}
	return nil
}

// ConfigRoleBindingName is the RoleBinding of --tenant-config-role in each
// tenant namespace of the management cluster.
const ConfigRoleBindingName = "bex-config"

// Releases returns the App controller's Releases over r.
func (r *Runtime) Releases() Releases {
	return Releases{Pipeline: r.Pipeline, Driver: r.Driver, Kube: r.kube, ConfigRole: r.configRole, Subjects: r.subjects}
}

// EnsureRunning rolls the App's current release out again only when the
// workload cluster runs nothing for the app (its Deployments were deleted,
// or the cluster is new). While any Deployment of the app exists, whatever
// release it runs, it leaves it alone: in a cluster the git receiver
// deploys in another process, and a release newer than the App's status
// may be rolling out there (pipeline.EnsureRunning would roll it back).
func (r Releases) EnsureRunning(ctx context.Context, app *platformv1alpha1.App) error {
	if app.Status.CurrentRelease == 0 {
		return nil
	}
	_, err := r.Driver.Status(ctx, app.Namespace, app.Name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, runtime.ErrNotFound) {
		return err
	}
	return r.Pipeline.EnsureRunning(ctx, app)
}
