package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/buildpod"
	"bex.co/bex/builder/pipeline"
	"bex.co/bex/builder/release"
	"bex.co/bex/cmd/internal/command"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/kubeconfig"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/runtime/runtimemetrics"
	"bex.co/bex/internal/store"
)

// Options are the flags of the release side of a cluster deployment: the
// cluster releases run in, the registry images live in, the scratch
// directory, the domain of apps' URLs, how tenant namespaces are confined
// and how many releases are kept.
type Options struct {
	// Metrics receives the Releaser's and the pipeline's metrics
	// (docs/metrics.md): the command's ops registry (or the controller
	// manager's). Not a flag; nil counts without serving.
	Metrics prometheus.Registerer
	// WorkloadKubeconfig is the kubeconfig of the cluster apps run in; empty
	// means the cluster the process runs in. With FollowPlacement it is
	// the static cluster WorkloadCluster, and where build Pods run.
	WorkloadKubeconfig string
	// FollowPlacement runs each app on the cluster the scheduler placed it
	// on (App status.cluster): a Cluster API cluster of the management
	// cluster, reached through its <cluster>-kubeconfig Secret, or
	// WorkloadCluster.
	FollowPlacement bool
	// WorkloadCluster is the name the scheduler knows WorkloadKubeconfig's
	// cluster by (bex-apiserver's --local-cluster); empty: apps run on
	// Cluster API clusters only. With FollowPlacement.
	WorkloadCluster string
	// FleetNamespace, when set, is the only namespace the Cluster API
	// clusters apps run on are read in. With FollowPlacement.
	FleetNamespace string
	// RuntimeKubeconfigs, NAMESPACE/NAME, is the Secret the Cluster API
	// clusters' kubeconfigs are read from instead of their admin
	// <cluster>-kubeconfig Secrets: one key per cluster, each a token of
	// the kube driver's rights only, written by the controller manager
	// (controllers/runtimecreds). Their tenant namespaces are then
	// prepared by the controller manager (PreparedNamespaces). With
	// FollowPlacement.
	RuntimeKubeconfigs string
	// Registry is the host[:port] of the platform registry built images are
	// pushed to and the workload cluster pulls from.
	Registry string
	// WorkDir holds builds' work directories and caches, and the image
	// configuration read from each release's image.
	WorkDir string
	// AppDomain is the domain of apps' URLs, https://<app>-<tenant>.<domain>.
	AppDomain string
	// Tenants is how the kube driver confines tenant namespaces.
	Tenants TenantOptions
	// ReleaseRetention is how many releases of an app keep their image
	// (release.Options.ReleaseRetention). Every process that releases (the
	// git receiver, web) must be given the same.
	ReleaseRetention int
	// Quotas are the tenants' default quotas releases are checked against
	// (the instances quota; the command binds their flags). Not a flag;
	// nil means quota.NewDefaults().
	Quotas *quota.Defaults
}

// BuildOptions are the flags of the one command that builds (bex-git).
type BuildOptions struct {
	// BuildKitAddr is the buildkitd Dockerfile builds go to.
	BuildKitAddr string
	// RunImage is the image built apps are laid on (see
	// build.Options.RunImage): the kube driver runs images as containers,
	// which need /bin/sh and the stacks' runtimes.
	RunImage string
	// MaxCheckoutBytes bounds what one build checks out of the pushed
	// commit (build.Options.MaxCheckoutBytes).
	MaxCheckoutBytes int64
	// Quotas are the tenants' default quotas builds are checked against
	// (the command binds their flags); nil means quota.NewDefaults().
	Quotas *quota.Defaults
	// BuildImage, when set, runs each build's steps in a Pod of the
	// tenant's on the workload cluster, from this image (the stacks'
	// toolchains and bex-build-agent; builder/buildpod), with BuildCPU and
	// BuildMemory; empty runs them in this process's container.
	BuildImage                       string
	BuildCPU, BuildMemory, BuildDisk string
}

// TenantOptions are the flags of what the kube driver keeps in every tenant
// namespace (kube.Options' Network, TenantRole and PreparedNamespaces).
type TenantOptions struct {
	IngressNamespace string
	IngressPodLabels map[string]string
	IngressCIDRs     []string
	EgressCIDRs      []string
	// Builds is what build Pods may reach and be reached from.
	Builds kube.BuildNetwork
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
	fs.StringVar(&o.Builds.IngressNamespace, "build-ingress-namespace", o.Builds.IngressNamespace, "Namespace of the pods (the git receiver's) that may connect to build Pods' agents; empty: none (each tenant namespace's NetworkPolicy bex-build)")
	fs.StringToStringVar(&o.Builds.IngressPodLabels, "build-ingress-pod-labels", o.Builds.IngressPodLabels, "Labels of the pods of --build-ingress-namespace that may connect to build Pods; empty: all of its pods")
	fs.StringSliceVar(&o.Builds.IngressCIDRs, "build-ingress-cidrs", o.Builds.IngressCIDRs, "CIDRs that may also connect to build Pods' agents (a git receiver outside the workload cluster)")
	fs.StringSliceVar(&o.Builds.EgressCIDRs, "build-egress-cidrs", o.Builds.EgressCIDRs, "CIDRs builds may connect to (package indexes: npm, PyPI, the Go module proxy); empty: nothing but DNS")
	fs.StringSliceVar(&o.Builds.EgressExceptCIDRs, "build-egress-except-cidrs", o.Builds.EgressExceptCIDRs, "CIDRs left out of --build-egress-cidrs (the cluster's own networks)")
	fs.StringVar(&o.Role, "tenant-role", o.Role, "ClusterRole bound in each tenant namespace to --tenant-role-service-accounts (the rights of a process that deploys without cluster-wide rights)")
	fs.StringVar(&o.ConfigRole, "tenant-config-role", o.ConfigRole, "ClusterRole bound in each tenant namespace of the management cluster to --tenant-role-service-accounts (reading the Secrets apps' env refers to)")
	fs.StringSliceVar(&o.ServiceAccounts, "tenant-role-service-accounts", o.ServiceAccounts, "ServiceAccounts (namespace/name) --tenant-role and --tenant-config-role are bound to in each tenant namespace")
	fs.BoolVar(&o.Prepared, "prepared-namespaces", o.Prepared, "Tenant namespaces are prepared by the controller manager: only check them before deploying (for a process without rights on namespaces)")
}

func (o *TenantOptions) validate() []error {
	var errs []error
	for flag, cidrs := range map[string][]string{
		"--tenant-ingress-cidrs": o.IngressCIDRs, "--tenant-egress-cidrs": o.EgressCIDRs,
		"--build-ingress-cidrs": o.Builds.IngressCIDRs, "--build-egress-cidrs": o.Builds.EgressCIDRs, "--build-egress-except-cidrs": o.Builds.EgressExceptCIDRs,
	} {
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
			IngressCIDRs: o.IngressCIDRs, EgressCIDRs: o.EgressCIDRs, Builds: o.Builds,
		},
		TenantRole: o.Role, TenantSubjects: subs, PreparedNamespaces: o.Prepared,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.WorkloadKubeconfig, "workload-kubeconfig", o.WorkloadKubeconfig, "Kubeconfig of the cluster apps run in (Deployments in the tenants' namespaces) and build Pods run in; empty: the cluster this runs in. With --follow-placement, the cluster --workload-cluster names")
	fs.BoolVar(&o.FollowPlacement, "follow-placement", o.FollowPlacement, "Run each app on the cluster the scheduler placed it on: a Cluster API cluster (its <cluster>-kubeconfig Secret in the management cluster) or --workload-cluster; an app placed nowhere is not deployed (docs/install.md)")
	fs.StringVar(&o.FleetNamespace, "fleet-namespace", o.FleetNamespace, "With --follow-placement: read the Cluster API clusters apps run on, and their kubeconfig Secrets, in this namespace only (default: all)")
	fs.StringVar(&o.WorkloadCluster, "workload-cluster", o.WorkloadCluster, "With --follow-placement: the name the scheduler knows --workload-kubeconfig's cluster by (bex-apiserver's --local-cluster NAME:…); empty: apps run on Cluster API clusters only")
	fs.StringVar(&o.RuntimeKubeconfigs, "runtime-kubeconfigs-secret", o.RuntimeKubeconfigs, "With --follow-placement: NAMESPACE/NAME of the Secret the Cluster API clusters' kubeconfigs are read from (key NAMESPACE.CLUSTER, the kube driver's rights only, written by the controller manager) instead of their admin <cluster>-kubeconfig Secrets; the controller manager then also prepares their tenant namespaces (docs/install.md)")
	fs.StringVar(&o.Registry, "registry", o.Registry, "host[:port] of the registry built images are pushed to and the workload cluster pulls from (required)")
	fs.StringVar(&o.WorkDir, "work-dir", o.WorkDir, "Scratch directory: build work trees and caches, images read back at release")
	fs.StringVar(&o.AppDomain, "app-domain", o.AppDomain, "Domain of the apps' URLs, https://<app>-<tenant>.<domain> (required)")
	fs.IntVar(&o.ReleaseRetention, "release-retention", cmp.Or(o.ReleaseRetention, release.DefaultReleaseRetention), "Releases of an app that keep their image: older ones are pruned after each release or rollback and cannot be rolled back to (1 or more; the same for every process that releases)")
	o.Tenants.addFlags(fs)
}

// AddFlags binds the options to fs.
func (o *BuildOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BuildKitAddr, "buildkit-addr", o.BuildKitAddr, "Address of a buildkitd for Dockerfile builds (tcp://127.0.0.1:1234); empty refuses Dockerfiles")
	fs.Int64Var(&o.MaxCheckoutBytes, "max-checkout-bytes", o.MaxCheckoutBytes, "Largest size the pushed tree may check out to in a build; a larger one fails the build saying so (0: 512 MiB)")
	fs.StringVar(&o.BuildImage, "build-image", o.BuildImage, "Builder image: with it, each build's steps (tenant code) run in a Pod of the tenant's on the workload cluster from this image, which carries the stacks' toolchains and bex-build-agent; empty: in this process's container (docs/security.md, \"Cluster mode\")")
	fs.StringVar(&o.BuildCPU, "build-cpu", "1", "CPU of each build's Pod (requests and limits; with --build-image)")
	fs.StringVar(&o.BuildMemory, "build-memory", "2Gi", "Memory of each build's Pod (requests and limits; with --build-image)")
	fs.StringVar(&o.BuildDisk, "build-disk", "4Gi", "What each build's Pod may write: checkout, HOME, TMPDIR, caches (ephemeral-storage requests and limits; with --build-image)")
	fs.StringVar(&o.RunImage, "run-image", o.RunImage, "Run image: the base built apps are laid on and run from as containers, with /bin/sh and the stacks' runtimes; of an index, linux/<this machine's architecture> (required; docs/builds.md)")
}

// Validate returns what is wrong with the options.
func (o *Options) Validate() []error {
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
	if !o.FollowPlacement {
		if o.WorkloadCluster != "" {
			errs = append(errs, errors.New("--workload-cluster needs --follow-placement: without it every app runs on --workload-kubeconfig's cluster"))
		}
		if o.FleetNamespace != "" {
			errs = append(errs, errors.New("--fleet-namespace needs --follow-placement: without it no Cluster API cluster is read"))
		}
		if o.RuntimeKubeconfigs != "" {
			errs = append(errs, errors.New("--runtime-kubeconfigs-secret needs --follow-placement: without it no Cluster API cluster is read"))
		}
	}
	if _, err := command.ParseSecretName("--runtime-kubeconfigs-secret", o.RuntimeKubeconfigs); err != nil {
		errs = append(errs, err)
	}
	if o.ReleaseRetention < 1 {
		errs = append(errs, fmt.Errorf("--release-retention %d: want 1 or more, the releases of an app kept for rollbacks (the one serving is always kept)", o.ReleaseRetention))
	}
	return append(errs, o.Tenants.validate()...)
}

// Validate returns what is wrong with the options: the kube driver runs
// built images as containers, which cannot start without a run image, so
// --run-image is required.
func (o *BuildOptions) Validate() []error {
	if o.MaxCheckoutBytes < 0 {
		return []error{fmt.Errorf("--max-checkout-bytes %d: must not be negative", o.MaxCheckoutBytes)}
	}
	if o.RunImage == "" {
		return []error{errors.New("--run-image is required: apps run as containers of the built image, which needs a base with /bin/sh and the stacks' runtimes (docs/builds.md, \"The run image\")")}
	}
	if _, err := name.ParseReference(o.RunImage); err != nil {
		return []error{fmt.Errorf("--run-image %q: %w", o.RunImage, err)}
	}
	if o.BuildImage != "" {
		if _, err := name.ParseReference(o.BuildImage); err != nil {
			return []error{fmt.Errorf("--build-image %q: %w", o.BuildImage, err)}
		}
		for flag, v := range map[string]string{"--build-cpu": o.BuildCPU, "--build-memory": o.BuildMemory, "--build-disk": o.BuildDisk} {
			if q, err := resource.ParseQuantity(v); err != nil || q.Sign() <= 0 {
				return []error{fmt.Errorf("%s %q: want a quantity above zero, like 1 or 500m for CPU, 2Gi for memory", flag, v)}
			}
		}
	}
	return nil
}

// Runtime is the release side of a cluster deployment: the driver apps
// run on and the Releaser over it.
type Runtime struct {
	// Driver runs the apps: Workload, or with FollowPlacement Placed.
	Driver runtime.Driver
	// Workload is the kube driver of the workload cluster
	// (--workload-kubeconfig): build Pods run there.
	Workload *kube.Driver
	// Placed runs each app on the cluster it is placed on; nil without
	// FollowPlacement. Its leftovers are swept by the controller manager.
	Placed   *placed.Driver
	Releaser *release.Releaser
	// ConfigRole is bound to Subjects in each tenant namespace of the
	// management cluster (--tenant-config-role).
	ConfigRole string
	Subjects   []rbacv1.Subject
}

// NewRuntime builds the kube driver for the workload cluster, with
// FollowPlacement the placed driver over the management cluster's Cluster
// API clusters (kubeClient) and the workload cluster, and the Releaser
// that records releases in st and App status through kubeClient. The
// placed driver's watches last until ctx ends. No builder is made: only
// bex-git builds, with BuildOptions.NewPipeline.
func (o *Options) NewRuntime(ctx context.Context, st *store.Store, kubeClient client.Client, log logr.Logger) (*Runtime, error) {
	cfg, err := kubeconfig.Load(o.WorkloadKubeconfig, "workload cluster")
	if err != nil {
		return nil, err
	}
	kopts := o.Tenants.KubeOptions()
	rt := &Runtime{ConfigRole: o.Tenants.ConfigRole}
	rt.Subjects, _ = o.Tenants.subjects()
	if o.FollowPlacement {
		rt.Placed, rt.Workload, err = o.placedRuntime(ctx, cfg, kopts, st, kubeClient, log.WithName("runtime"))
		rt.Driver = rt.Placed
	} else {
		rt.Workload, err = kube.New(cfg, kopts)
		rt.Driver = rt.Workload
	}
	if err != nil {
		return nil, err
	}
	domain := o.AppDomain
	ropts := release.Options{
		Store: st, Kube: kubeClient, Runtime: rt.Driver, FollowPlacement: o.FollowPlacement,
		ReleasesDir: filepath.Join(o.WorkDir, "releases"),
		URL:         func(tenant, app string) string { return "https://" + edge.Hostname(tenant, app, domain) },
		Log:         log.WithName("releaser"), ReleaseRetention: o.ReleaseRetention, Quotas: o.Quotas, Metrics: o.Metrics,
	}
	if o.FollowPlacement {
		// A scale's room is checked where the app is placed, as make run
		// does: the process needs to create PlacementReviews.
		ropts.Fits = appctrl.SchedulerPlacer{Client: kubeClient}
	}
	rt.Releaser, err = release.New(ropts)
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// InstanceMetrics returns the collector of the apps' instances and
// restarts (bex_runtime_instances, bex_runtime_restarts_total,
// driver="kube"), read at each scrape from every cluster apps run on: the
// placed driver's kube clusters at hand, or the workload cluster. One
// process registers it (the controller manager, which keeps the apps
// running), with active saying whether it is the leader: every process
// would read the same clusters.
func (rt *Runtime) InstanceMetrics(active func() bool, log logr.Logger) (prometheus.Collector, error) {
	sources := rt.Workload.MetricsSources
	if rt.Placed != nil {
		sources = rt.Placed.InstancesReaders
	}
	c, err := runtimemetrics.New(runtimemetrics.Options{Driver: kube.DriverLabel, Sources: sources, Active: active, Log: log})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// placedRuntime is the driver that runs each app where it is placed, over
// the workload cluster (as WorkloadCluster, when named) and a kube driver
// per Cluster API cluster, and the workload cluster's own kube driver. The
// Ledger is shared with the platform's other processes. A Cluster API
// cluster's driver prepares tenant namespaces itself when it uses Cluster
// API's kubeconfig, the cluster's admin, whatever --prepared-namespaces
// says of the workload cluster; with RuntimeKubeconfigs it only checks
// them (docs/install.md).
func (o *Options) placedRuntime(ctx context.Context, cfg *rest.Config, kopts kube.Options, st *store.Store, kubeClient client.Client, log logr.Logger) (*placed.Driver, *kube.Driver, error) {
	var static placed.Static
	var workload *kube.Driver
	if o.WorkloadCluster != "" {
		c, drv, err := placed.KubeCluster(ctx, cfg, kopts, log.WithValues("cluster", o.WorkloadCluster))
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to the workload cluster %s: %w", o.WorkloadCluster, err)
		}
		static, workload = placed.Static{o.WorkloadCluster: c}, drv
	} else {
		var err error
		if workload, err = kube.New(cfg, kopts); err != nil {
			return nil, nil, err
		}
	}
	fleetOpts := kopts
	fleetOpts.PreparedNamespaces = false
	runtimeSecret, _ := command.ParseSecretName("--runtime-kubeconfigs-secret", o.RuntimeKubeconfigs)
	if runtimeSecret.Name != "" {
		// The runtime kubeconfigs may not prepare namespaces nor bind
		// roles: the controller manager prepares the tenant namespaces of
		// every Cluster API cluster (controllers/runtimecreds).
		fleetOpts.PreparedNamespaces, fleetOpts.TenantRole, fleetOpts.TenantSubjects = true, "", nil
	}
	clusters, err := placed.NewKubeClusters(ctx, placed.KubeOptions{Client: kubeClient, Namespace: o.FleetNamespace, Static: static, Driver: fleetOpts, RuntimeSecret: runtimeSecret, Log: log})
	if err != nil {
		return nil, nil, err
	}
	pd, err := placed.New(ctx, placed.Options{Clusters: clusters, Ledger: st, Shared: true, DrainDelay: SharedDrainDelay, Log: log})
	if err != nil {
		clusters.Close()
		return nil, nil, err
	}
	return pd, workload, nil
}

// SharedDrainDelay is how long a cluster install's old cluster keeps
// serving after a move switched: long enough for every edge replica to
// read the switch (placed.DefaultFollowInterval) and connect to the new
// cluster.
const SharedDrainDelay = 10 * time.Second

// NewPipeline builds the builder on w's work directory and registry, and
// the pipeline that builds pushes and hands them to rt's Releaser. The
// builder needs git on PATH. Until ctx ends it compiles Go's standard
// library for the builds' cache in the background, once per Go version
// (build.Builder.WarmGo), as make run does: the first Go push need not.
func (o *BuildOptions) NewPipeline(ctx context.Context, w *Options, rt *Runtime, log logr.Logger) (*pipeline.Pipeline, error) {
	opts := build.Options{
		WorkRoot: filepath.Join(w.WorkDir, "build"), Registry: w.Registry, BuildKitAddr: o.BuildKitAddr,
		RunImage: o.RunImage, MaxCheckoutBytes: o.MaxCheckoutBytes, Log: log.WithName("builder"),
	}
	if o.BuildImage != "" {
		remote, err := buildpod.Remote(buildpod.Options{
			Driver: rt.Workload, Image: o.BuildImage, Timeout: build.DefaultTimeout,
			Resources: runtime.Resources{CPU: o.BuildCPU, Memory: o.BuildMemory}, Disk: o.BuildDisk,
		})
		if err != nil {
			return nil, err
		}
		opts.Remote = remote
	}
	builder, err := build.New(opts)
	if err != nil {
		return nil, fmt.Errorf("creating the builder: %w", err)
	}
	if o.BuildImage != "" {
		// Builds compile in their Pods, with caches of their own.
		return o.pipeline(w, rt, builder, log)
	}
	go func() {
		warmLog := log.WithName("builder")
		if err := builder.WarmGo(ctx, logLines{log: warmLog}); err != nil && ctx.Err() == nil {
			warmLog.Error(err, "Warming the Go build cache; Go builds compile the standard library themselves")
		}
	}()
	return o.pipeline(w, rt, builder, log)
}

func (o *BuildOptions) pipeline(w *Options, rt *Runtime, builder *build.Builder, log logr.Logger) (*pipeline.Pipeline, error) {
	return pipeline.New(pipeline.Options{Releaser: rt.Releaser, Builder: builder, Quotas: o.Quotas, Metrics: w.Metrics, Log: log.WithName("pipeline")})
}

// logLines writes each line it is given as a log entry: the Go warm-up's
// progress.
type logLines struct{ log logr.Logger }

func (l logLines) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			l.log.Info("Go build cache", "progress", line)
		}
	}
	return len(p), nil
}
