package runtimecreds

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/kubeapply"
)

const (
	// Namespace holds the ServiceAccount on each workload cluster.
	Namespace = "bex-system"
	// ServiceAccount is the identity the runtime kubeconfigs carry.
	ServiceAccount = "bex-runtime"
	// ClusterRoleName is bound to ServiceAccount cluster-wide
	// (ClusterRoleBinding of the same name): ClusterRules.
	ClusterRoleName = "bex-runtime"
	// TenantRoleName is bound to ServiceAccount in each tenant namespace
	// (the kube driver's RoleBinding kube.TenantRoleBindingName):
	// TenantRules.
	TenantRoleName = "bex-runtime-tenant"
)

// ClusterRules are what the kube driver and the edge's routing table read
// in every namespace: tenant namespaces (the driver checks them, the edge
// watches them by label), the apps' Deployments (Watch, ReadApps), Pods
// (ReadApps, SweepRuns), Services and EndpointSlices (the edge's table),
// and the nodes' stats summaries (Usage: through the node proxy, or from
// the kubelet with nodes/stats). get of nodes/proxy reaches the whole of a
// kubelet's API, its exec among them: the identity is the platform's,
// never a tenant's. Nothing is written outside
// tenant namespaces, and no Secret is read there.
func ClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "services"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/proxy", "nodes/stats"}, Verbs: []string{"get"}},
	}
}

// TenantRules are what the kube driver does in a tenant namespace it
// deploys to (the chart's tenant-runtime role and the runtime role's
// writes): a release's env Secret, Deployments, the web Service,
// PodDisruptionBudgets, runs' Pods and Secrets (patch: a detached run is
// stopped by lowering its deadline), pods' logs and events, attaching to
// its runs' Pods (a run with input or a terminal), and the NetworkPolicy
// it checks.
func TenantRules() []rbacv1.PolicyRule {
	rw := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "services"}, Verbs: rw},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: rw},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: rw},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods/attach"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get"}},
	}
}

func runtimeSubjects() []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: ServiceAccount}}
}

// workload is a workload cluster reached as its admin.
type workload struct {
	c  client.Client
	cs kubernetes.Interface
}

func newWorkload(cfg *rest.Config) (*workload, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("making the workload cluster's client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("making the workload cluster's client: %w", err)
	}
	return &workload{c: c, cs: cs}, nil
}

// ensureIdentity applies Namespace, ServiceAccount, the two ClusterRoles
// and the ClusterRoleBinding, and returns the ServiceAccount's UID.
func (w *workload) ensureIdentity(ctx context.Context) (types.UID, error) {
	opts := []client.ApplyOption{client.FieldOwner(kubeapply.FieldManager), client.ForceOwnership}
	labels := map[string]string{"app.kubernetes.io/managed-by": "bex"}
	objs := []struct {
		what string
		ac   k8sruntime.ApplyConfiguration
	}{
		{"namespace " + Namespace, corev1ac.Namespace(Namespace).WithLabels(labels)},
		{"service account " + ServiceAccount, corev1ac.ServiceAccount(ServiceAccount, Namespace).WithLabels(labels).WithAutomountServiceAccountToken(false)},
		{"cluster role " + ClusterRoleName, rbacv1ac.ClusterRole(ClusterRoleName).WithLabels(labels).WithRules(rulesAC(ClusterRules())...)},
		{"cluster role " + TenantRoleName, rbacv1ac.ClusterRole(TenantRoleName).WithLabels(labels).WithRules(rulesAC(TenantRules())...)},
		{"cluster role binding " + ClusterRoleName, rbacv1ac.ClusterRoleBinding(ClusterRoleName).WithLabels(labels).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(ClusterRoleName)).
			WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(Namespace).WithName(ServiceAccount))},
	}
	for _, o := range objs {
		if err := w.c.Apply(ctx, o.ac, opts...); err != nil {
			return "", fmt.Errorf("applying %s: %w", o.what, err)
		}
	}
	sa := &corev1.ServiceAccount{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: ServiceAccount}, sa); err != nil {
		return "", fmt.Errorf("reading service account %s/%s: %w", Namespace, ServiceAccount, err)
	}
	return sa.UID, nil
}

func rulesAC(rules []rbacv1.PolicyRule) []*rbacv1ac.PolicyRuleApplyConfiguration {
	out := make([]*rbacv1ac.PolicyRuleApplyConfiguration, 0, len(rules))
	for _, r := range rules {
		out = append(out, rbacv1ac.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...))
	}
	return out
}

// mintToken asks for a token of ServiceAccount valid for lifetime, and
// returns it with its expiry as the apiserver set it.
func (w *workload) mintToken(ctx context.Context, lifetime time.Duration) (string, time.Time, error) {
	secs := int64(lifetime.Seconds())
	tr, err := w.cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// runtimeKubeconfig is a kubeconfig of admin's server and CA with token.
func runtimeKubeconfig(cluster string, admin *rest.Config, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData, TLSServerName: admin.ServerName}
	cfg.AuthInfos[ServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: ServiceAccount, Namespace: Namespace}
	cfg.CurrentContext = cluster
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("writing the runtime kubeconfig of cluster %s: %w", cluster, err)
	}
	return out, nil
}

type claims struct {
	expires time.Time
	uid     types.UID
}

// readClaims reads a ServiceAccount token's expiry and ServiceAccount UID
// (its JWT claims exp and kubernetes.io.serviceaccount.uid), unverified:
// the token is the one this controller wrote.
func readClaims(token string) (claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims{}, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return claims{}, fmt.Errorf("the token's claims: %w", err)
	}
	var c struct {
		Exp  int64 `json:"exp"`
		Kube struct {
			ServiceAccount struct {
				UID string `json:"uid"`
			} `json:"serviceaccount"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.Exp == 0 {
		return claims{}, fmt.Errorf("the token's claims: no exp (%v)", err)
	}
	return claims{expires: time.Unix(c.Exp, 0), uid: types.UID(c.Kube.ServiceAccount.UID)}, nil
}
