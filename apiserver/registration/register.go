package registration

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"bex.co/bex/apis/scheduling/v1alpha1"
)

// Defaults of Options.
const (
	DefaultNamespace   = "bex-system"
	DefaultServiceName = "bex-apiserver"
	// APIServiceName is the APIService of scheduling.bex.co/v1alpha1.
	APIServiceName = "v1alpha1.scheduling.bex.co"
	// ClusterRoleName is the ClusterRole of bex-apiserver's own identity.
	ClusterRoleName = "bex-apiserver"
)

// Options says where bex-apiserver listens and who it is.
type Options struct {
	// Namespace of the Service; DefaultNamespace when empty.
	Namespace string
	// ServiceName of the Service; DefaultServiceName when empty.
	ServiceName string
	// ExternalName, when set, makes the Service of type ExternalName for a
	// bex-apiserver outside the cluster's pods, e.g. "localhost" in embedded
	// mode and tests. Empty: a ClusterIP Service selecting Selector.
	ExternalName string
	// Selector of the bex-apiserver pods, for a ClusterIP Service.
	Selector map[string]string
	// Port bex-apiserver serves on (the Service port; with ExternalName, the
	// port the aggregator dials on that host).
	Port int32
	// CABundle is the PEM CA that signed the serving certificate.
	CABundle []byte
	// Subject is bex-apiserver's identity in the kube-apiserver (a user or
	// ServiceAccount); it is granted what the server needs.
	Subject rbacv1.Subject
	// AvailableTimeout bounds the wait for the APIService to be Available;
	// zero means two minutes.
	AvailableTimeout time.Duration
}

func (o *Options) defaults() error {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.AvailableTimeout == 0 {
		o.AvailableTimeout = 2 * time.Minute
	}
	var errs []error
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is not a port", o.Port))
	}
	if len(o.CABundle) == 0 {
		errs = append(errs, errors.New("no CA bundle"))
	}
	if o.Subject.Name == "" {
		errs = append(errs, errors.New("no subject"))
	}
	if o.ExternalName == "" && len(o.Selector) == 0 {
		errs = append(errs, errors.New("neither an external name nor a selector"))
	}
	return errors.Join(errs...)
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiregistrationv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

// GrantAccess creates or updates the RBAC that bex-apiserver's identity
// needs: system:auth-delegator (TokenReview, SubjectAccessReview), the
// extension-apiserver-authentication-reader Role in kube-system (the
// client and front-proxy CAs), and read access to namespaces, admission
// configuration, kubeconfig Secrets and the Cluster API objects of the
// fleet. Do it before bex-apiserver starts; cfg must be allowed to grant it.
func GrantAccess(ctx context.Context, cfg *rest.Config, subject rbacv1.Subject) error {
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	return grantAccess(ctx, c, subject)
}

func grantAccess(ctx context.Context, c client.Client, subject rbacv1.Subject) error {
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName}}
	if err := createOrUpdate(ctx, c, role, func() {
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "secrets"}, Verbs: read},
			{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters", "machines", "machinedeployments"}, Verbs: read},
			{APIGroups: []string{"controlplane.cluster.x-k8s.io"}, Resources: []string{"kubeadmcontrolplanes"}, Verbs: read},
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"*"}, Verbs: read},
		}
	}); err != nil {
		return err
	}
	bindings := []struct {
		name, namespace, kind, role string
	}{
		{ClusterRoleName, "", "ClusterRole", ClusterRoleName},
		{ClusterRoleName + ":system:auth-delegator", "", "ClusterRole", "system:auth-delegator"},
		{ClusterRoleName + ":extension-apiserver-authentication-reader", metav1.NamespaceSystem, "Role", "extension-apiserver-authentication-reader"},
	}
	for _, b := range bindings {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: b.kind, Name: b.role}
		var obj client.Object
		var set func()
		if b.namespace == "" {
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.name}}
			obj, set = crb, func() { crb.RoleRef, crb.Subjects = ref, []rbacv1.Subject{subject} }
		} else {
			rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.namespace}}
			obj, set = rb, func() { rb.RoleRef, rb.Subjects = ref, []rbacv1.Subject{subject} }
		}
		if err := createOrUpdate(ctx, c, obj, set); err != nil {
			return err
		}
	}
	return nil
}

// Register grants bex-apiserver's identity its access (GrantAccess), then
// creates or updates the namespace, the Service and the APIService, and
// waits until the aggregator reports the APIService Available.
func Register(ctx context.Context, cfg *rest.Config, o Options) error {
	if err := o.defaults(); err != nil {
		return fmt.Errorf("registering bex-apiserver: %w", err)
	}
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	if err := grantAccess(ctx, c, o.Subject); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}
	if err := createOrUpdate(ctx, c, ns, func() {}); err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: o.ServiceName, Namespace: o.Namespace}}
	if err := createOrUpdate(ctx, c, svc, func() {
		svc.Spec.Ports = []corev1.ServicePort{{Name: "https", Port: o.Port, Protocol: corev1.ProtocolTCP}}
		if o.ExternalName != "" {
			svc.Spec.Type, svc.Spec.ExternalName, svc.Spec.Selector = corev1.ServiceTypeExternalName, o.ExternalName, nil
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		} else {
			svc.Spec.Type, svc.Spec.ExternalName, svc.Spec.Selector = corev1.ServiceTypeClusterIP, "", o.Selector
		}
	}); err != nil {
		return err
	}
	as := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: APIServiceName}}
	if err := createOrUpdate(ctx, c, as, func() {
		port := o.Port
		as.Spec = apiregistrationv1.APIServiceSpec{
			Group:                v1alpha1.GroupName,
			Version:              v1alpha1.SchemeGroupVersion.Version,
			Service:              &apiregistrationv1.ServiceReference{Namespace: o.Namespace, Name: o.ServiceName, Port: &port},
			CABundle:             o.CABundle,
			GroupPriorityMinimum: 1000,
			VersionPriority:      15,
		}
	}); err != nil {
		return err
	}
	return WaitAvailable(ctx, cfg, o.AvailableTimeout)
}

// WaitAvailable polls the APIService until it is Available, for at most
// timeout; the error then carries the aggregator's last message.
func WaitAvailable(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		as := &apiregistrationv1.APIService{}
		if err := c.Get(ctx, client.ObjectKey{Name: APIServiceName}, as); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range as.Status.Conditions {
			if cond.Type == apiregistrationv1.Available {
				last = cond.Reason + ": " + cond.Message
				return cond.Status == apiregistrationv1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for APIService %s to be Available (last: %s): %w", APIServiceName, last, err)
	}
	return nil
}

// Unregister deletes the APIService, so that the kube-apiserver stops
// routing to a bex-apiserver that is going away. Missing is not an error.
func Unregister(ctx context.Context, cfg *rest.Config) error {
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	err = c.Delete(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: APIServiceName}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting APIService: %w", err)
	}
	return nil
}

func createOrUpdate(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	if _, err := controllerutil.CreateOrUpdate(ctx, c, obj, func() error { mutate(); return nil }); err != nil {
		return fmt.Errorf("applying %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
