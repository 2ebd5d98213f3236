package app

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/release"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
)

// Releases is the App controller's view of the Releaser in a cluster.
type Releases struct {
	*release.Releaser
	Driver runtime.Driver
	// Workload, when set, prepares tenant namespaces in the workload
	// cluster (--workload-kubeconfig's) in Driver's place: with
	// --follow-placement Driver runs apps on several clusters, and those
	// of Cluster API prepare their namespaces as they deploy.
	Workload *kube.Driver
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
	if r.Workload != nil {
		if err := r.Workload.PrepareNamespace(ctx, tenant); err != nil {
			return err
		}
	} else if p, ok := r.Driver.(appctrl.NamespacePreparer); ok {
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

// EnsureRunning rolls the App's current release out again only when the
// workload cluster runs nothing for the app (its Deployments were deleted,
// or the cluster is new). While any Deployment of the app exists, whatever
// release it runs, it leaves it alone: in a cluster the git receiver
// deploys in another process, and a release newer than the App's status
// may be rolling out there (release.Releaser.EnsureRunning would roll it
// back).
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
	return r.Releaser.EnsureRunning(ctx, app)
}
