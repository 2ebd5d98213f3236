package kube

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"bex.co/bex/internal/runtime"
)

// Labels and annotations the driver writes.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelTenant    = "bex.co/tenant"
	LabelApp       = "bex.co/app"
	LabelProcess   = "bex.co/process"
	LabelRelease   = "bex.co/release"

	managedBy = "bex"

	// AnnotationRestart on a Deployment's pod template is the Restart of
	// its process (runtime.Process): a new one rolls the pods, as kubectl
	// rollout restart's restartedAt does.
	AnnotationRestart = "bex.co/restart"
)

// WebPort is the PORT of web containers.
const WebPort = 8080

// Pod Security admission's namespace labels
// (https://kubernetes.io/docs/concepts/security/pod-security-admission/).
const (
	labelPSAEnforce        = "pod-security.kubernetes.io/enforce"
	labelPSAEnforceVersion = "pod-security.kubernetes.io/enforce-version"
	labelPSAWarn           = "pod-security.kubernetes.io/warn"
	labelPSAAudit          = "pod-security.kubernetes.io/audit"
	psaRestricted          = "restricted"
)

// TenantPolicyName is the NetworkPolicy the driver keeps in every tenant
// namespace.
const TenantPolicyName = "bex-tenant"

// BuildPolicyName is the NetworkPolicy of build Pods the driver keeps in
// every tenant namespace.
const BuildPolicyName = "bex-build"

// TenantRoleBindingName is the RoleBinding of Options.TenantRole in every
// tenant namespace.
const TenantRoleBindingName = "bex-runtime"

// AppUser is the uid and gid apps' containers run as: Pod Security's
// restricted profile refuses root, and built images name no user.
const AppUser = 10000

// ObjectName is the name of the Deployment (and PodDisruptionBudget) of a
// process: "<app>-<process>".
func ObjectName(app, process string) string { return app + "-" + process }

// EnvSecretName is the name of the Secret that holds the environment of one
// release of an app: "<app>-env-<number>". Each release has its own, so a
// rollout never changes what the pods of the release before it read.
func EnvSecretName(app string, number int) string {
	return app + "-env-" + strconv.Itoa(number)
}

// selector is what a process's Deployment, Service and PDB select on; it
// never changes between releases.
func selector(app, process string) map[string]string {
	return map[string]string{LabelApp: app, LabelProcess: process}
}

func labels(rel runtime.Release, process string) map[string]string {
	return map[string]string{
		LabelName:      rel.App,
		LabelComponent: process,
		LabelManagedBy: managedBy,
		LabelTenant:    rel.Tenant,
		LabelApp:       rel.App,
		LabelProcess:   process,
		LabelRelease:   strconv.Itoa(rel.Number),
	}
}

// TenantNamespaceSelector selects the namespaces the driver prepared for
// tenants (PrepareNamespace labels them). Whoever serves apps' Services (the
// edge) serves them in these namespaces only.
func TenantNamespaceSelector() k8slabels.Selector {
	return managedSelector(LabelTenant)
}

// AppServiceSelector selects the Services the driver made for apps' web
// processes (one per app, named after it) and, since the EndpointSlice
// controller copies a Service's labels onto its EndpointSlices, their
// slices. Nothing else the driver makes is a Service.
func AppServiceSelector() k8slabels.Selector {
	return managedSelector(LabelApp)
}

// managedSelector selects objects the driver manages that carry the label
// key.
func managedSelector(key string) k8slabels.Selector {
	managed, err := k8slabels.NewRequirement(LabelManagedBy, selection.Equals, []string{managedBy})
	if err != nil {
		panic(err) // constant arguments
	}
	has, err := k8slabels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return k8slabels.NewSelector().Add(*managed, *has)
}

// appLabels are the labels of objects that belong to the app as a whole.
func appLabels(rel runtime.Release) map[string]string {
	return map[string]string{
		LabelName:      rel.App,
		LabelManagedBy: managedBy,
		LabelTenant:    rel.Tenant,
		LabelApp:       rel.App,
		LabelRelease:   strconv.Itoa(rel.Number),
	}
}

// resources parses the release's resources into requests and limits (the
// same: a replica gets what its plan says, no more, no less).
func resources(r runtime.Resources) (*corev1ac.ResourceRequirementsApplyConfiguration, error) {
	list := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: r.CPU, corev1.ResourceMemory: r.Memory} {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("invalid %s %q: %w", name, v, err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("invalid %s %q: must be greater than zero", name, v)
		}
		list[name] = q
	}
	if len(list) == 0 {
		return nil, nil
	}
	return corev1ac.ResourceRequirements().WithRequests(list).WithLimits(list), nil
}

// deployment returns the Deployment of one process of rel.
func (d *Driver) deployment(ns string, rel runtime.Release, process string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	p := rel.Processes[process]
	container, err := appContainer(rel, process, EnvSecretName(rel.App, rel.Number))
	if err != nil {
		return nil, err
	}
	if p.Command != "" {
		container.WithCommand("/bin/sh", "-c", p.Command)
	}
	grace := seconds(d.opts.GracePeriod)
	if process == runtime.WebProcess {
		container.WithEnv(corev1ac.EnvVar().WithName("PORT").WithValue(strconv.Itoa(WebPort)))
		container.WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(WebPort).WithProtocol(corev1.ProtocolTCP))
		container.WithReadinessProbe(readinessProbe(rel.HealthCheck))
		container.WithStartupProbe(startupProbe(rel.HealthCheck, d.opts.StartTimeout))
		// A deleted web pod serves on until the edge no longer sends it
		// requests; its grace period covers that, then its own stop.
		if d.opts.DrainDelay > 0 {
			drain := seconds(d.opts.DrainDelay)
			container.WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
				WithSleep(corev1ac.SleepAction().WithSeconds(int64(drain)))))
			grace += drain
		}
	}
	lbls := labels(rel, process)
	release := strconv.Itoa(rel.Number)
	template := corev1ac.PodTemplateSpec().WithLabels(lbls)
	if p.Restart != "" {
		template.WithAnnotations(map[string]string{AnnotationRestart: p.Restart})
	}
	return appsv1ac.Deployment(ObjectName(rel.App, process), ns).
		WithLabels(lbls).
		WithAnnotations(map[string]string{LabelRelease: release}).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(int32(p.Replicas)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(rel.App, process))).
			WithRevisionHistoryLimit(5).
			WithProgressDeadlineSeconds(int32(d.opts.ProgressDeadline.Seconds())).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType("RollingUpdate").
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(0)).
					WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(template.WithSpec(d.podSpec(container).WithTerminationGracePeriodSeconds(int64(grace))))), nil
}

// appContainer returns a container of rel named name, as every instance of
// the release has it: the release's image, its environment from the Secret
// secret, no privilege, a HOME and the release's resources. The caller adds
// the command, and the port and probe of a web process.
func appContainer(rel runtime.Release, name, secret string) (*corev1ac.ContainerApplyConfiguration, error) {
	res, err := resources(rel.Resources)
	if err != nil {
		return nil, err
	}
	container := corev1ac.Container().
		WithName(name).
		WithImage(rel.Image).
		WithImagePullPolicy(corev1.PullIfNotPresent)
	// The release's environment comes from its Secret, never as values in
	// the pod spec, which anyone who can read Deployments sees.
	container.WithEnvFrom(corev1ac.EnvFromSource().WithSecretRef(corev1ac.SecretEnvSource().WithName(secret)))
	container.WithSecurityContext(confined())
	// AppUser has no home in the image: a HOME it can write, unless the
	// image or the app names one.
	if _, ok := rel.Env["HOME"]; !ok && rel.ImageEnv["HOME"] == "" {
		container.WithEnv(corev1ac.EnvVar().WithName("HOME").WithValue("/tmp"))
	}
	if res != nil {
		container.WithResources(res)
	}
	return container, nil
}

// confined is the security context of every container the driver runs:
// no privilege escalation, no capability.
func confined() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

// podSpec returns the spec of a pod of the app that runs container, as Pod
// Security's restricted profile wants it: non-root AppUser, RuntimeDefault
// seccomp, no service account token, no service links.
func (d *Driver) podSpec(container *corev1ac.ContainerApplyConfiguration) *corev1ac.PodSpecApplyConfiguration {
	return corev1ac.PodSpec().
		WithContainers(container).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(AppUser).
			WithRunAsGroup(AppUser).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithEnableServiceLinks(false).
		WithAutomountServiceAccountToken(false).
		WithTerminationGracePeriodSeconds(int64(d.opts.GracePeriod.Seconds()))
}

// envSecret returns the Secret of rel's environment (PORT aside: the driver
// sets it).
func envSecret(ns string, rel runtime.Release) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(EnvSecretName(rel.App, rel.Number), ns).
		WithLabels(appLabels(rel)).
		WithType(corev1.SecretTypeOpaque).
		WithData(envData(rel))
}

// envData is rel's environment as a Secret's data, PORT aside.
func envData(rel runtime.Release) map[string][]byte {
	data := make(map[string][]byte, len(rel.Env))
	for k, v := range rel.Env {
		if k != "PORT" {
			data[k] = []byte(v)
		}
	}
	return data
}

// readinessProbe turns the health check into a probe: httpGet with a path,
// tcpSocket without one.
func readinessProbe(h runtime.HealthCheck) *corev1ac.ProbeApplyConfiguration {
	h = h.WithDefaults()
	port := intstr.FromInt32(WebPort)
	if h.Port != 0 {
		port = intstr.FromInt32(int32(h.Port))
	}
	probe := corev1ac.Probe().
		WithTimeoutSeconds(seconds(h.Timeout)).
		WithPeriodSeconds(seconds(h.Interval)).
		WithSuccessThreshold(int32(h.SuccessThreshold)).
		WithFailureThreshold(int32(h.FailureThreshold))
	if h.Path == "" {
		return probe.WithTCPSocket(corev1ac.TCPSocketAction().WithPort(port))
	}
	return probe.WithHTTPGet(corev1ac.HTTPGetAction().WithPath(h.Path).WithPort(port).WithScheme(corev1.URISchemeHTTP))
}

// startupProbe is the health check once a second until it first passes,
// for at most start: the kubelet runs the readiness probe, whose period is
// the health check's interval (10 s by default), only once it passed, and
// at once then. Without it a web container that was not listening yet at
// its first readiness probe waited a whole interval to be ready, and a
// push as long to go live.
func startupProbe(h runtime.HealthCheck, start time.Duration) *corev1ac.ProbeApplyConfiguration {
	return readinessProbe(h).WithPeriodSeconds(1).WithSuccessThreshold(1).WithFailureThreshold(seconds(start))
}

// seconds rounds d up to whole seconds, at least 1.
func seconds(d interface{ Seconds() float64 }) int32 {
	s := int32(d.Seconds())
	if float64(s) < d.Seconds() {
		s++
	}
	return max(s, 1)
}

// service returns the Service of the web process: port 80 to the
// containers' http port.
func (d *Driver) service(ns string, rel runtime.Release) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(rel.App, ns).
		WithLabels(appLabels(rel)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(selector(rel.App, runtime.WebProcess)).
			WithPorts(corev1ac.ServicePort().
				WithName("http").
				WithPort(int32(d.opts.ServicePort)).
				WithTargetPort(intstr.FromString("http")).
				WithProtocol(corev1.ProtocolTCP)))
}

// tenantNamespace returns the namespace of a tenant: labelled for Pod
// Security admission to enforce the restricted profile on every pod in it.
func tenantNamespace(ns, tenant string) *corev1ac.NamespaceApplyConfiguration {
	return corev1ac.Namespace(ns).WithLabels(map[string]string{
		LabelManagedBy:         managedBy,
		LabelTenant:            tenant,
		labelPSAEnforce:        psaRestricted,
		labelPSAEnforceVersion: "latest",
		labelPSAWarn:           psaRestricted,
		labelPSAAudit:          psaRestricted,
	})
}

// tenantPolicy returns the NetworkPolicy of a tenant namespace: it selects
// every pod there and allows only what n says (see TenantNetwork).
func tenantPolicy(ns, tenant string, n TenantNetwork) *networkingv1ac.NetworkPolicyApplyConfiguration {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector()).
		WithPolicyTypes("Ingress", "Egress")

	from := ingressPeers(n.IngressNamespace, n.IngressPodLabels, n.IngressCIDRs)
	if len(from) > 0 {
		spec.WithIngress(networkingv1ac.NetworkPolicyIngressRule().
			WithFrom(from...).
			WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(WebPort))))
	}

	dnsNS := n.DNSNamespace
	if dnsNS == "" {
		dnsNS = "kube-system"
	}
	spec.WithEgress(networkingv1ac.NetworkPolicyEgressRule().
		WithTo(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector().
			WithMatchLabels(map[string]string{"kubernetes.io/metadata.name": dnsNS}))).
		WithPorts(
			networkingv1ac.NetworkPolicyPort().WithProtocol(udp).WithPort(intstr.FromInt32(53)),
			networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(53))))
	if len(n.EgressCIDRs) > 0 {
		var to []*networkingv1ac.NetworkPolicyPeerApplyConfiguration
		for _, cidr := range n.EgressCIDRs {
			to = append(to, networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR(cidr)))
		}
		spec.WithEgress(networkingv1ac.NetworkPolicyEgressRule().WithTo(to...))
	}
	return networkingv1ac.NetworkPolicy(TenantPolicyName, ns).
		WithLabels(map[string]string{LabelManagedBy: managedBy, LabelTenant: tenant}).
		WithSpec(spec)
}

// buildPolicy returns the NetworkPolicy of a tenant namespace's build Pods:
// it selects them and allows what n says on top of the tenant policy (a
// pod's allowed traffic is the union of the policies that select it).
func buildPolicy(ns, tenant string, n BuildNetwork) *networkingv1ac.NetworkPolicyApplyConfiguration {
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{
			LabelComponent: buildComponent, LabelManagedBy: managedBy,
		})).
		WithPolicyTypes("Ingress", "Egress")
	from := ingressPeers(n.IngressNamespace, n.IngressPodLabels, n.IngressCIDRs)
	if len(from) > 0 {
		spec.WithIngress(networkingv1ac.NetworkPolicyIngressRule().
			WithFrom(from...).
			WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(BuildAgentPort))))
	}
	if len(n.EgressCIDRs) > 0 {
		var to []*networkingv1ac.NetworkPolicyPeerApplyConfiguration
		for _, cidr := range n.EgressCIDRs {
			block := networkingv1ac.IPBlock().WithCIDR(cidr)
			for _, ex := range n.EgressExceptCIDRs {
				if cidrWithin(ex, cidr) {
					block.WithExcept(ex)
				}
			}
			to = append(to, networkingv1ac.NetworkPolicyPeer().WithIPBlock(block))
		}
		spec.WithEgress(networkingv1ac.NetworkPolicyEgressRule().WithTo(to...))
	}
	return networkingv1ac.NetworkPolicy(BuildPolicyName, ns).
		WithLabels(map[string]string{LabelManagedBy: managedBy, LabelTenant: tenant}).
		WithSpec(spec)
}

// ingressPeers are the peers a policy's ingress rule allows: the pods of
// namespace ns with labels (every pod of it without), and cidrs.
func ingressPeers(ns string, labels map[string]string, cidrs []string) []*networkingv1ac.NetworkPolicyPeerApplyConfiguration {
	var from []*networkingv1ac.NetworkPolicyPeerApplyConfiguration
	if ns != "" {
		peer := networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector().
			WithMatchLabels(map[string]string{"kubernetes.io/metadata.name": ns}))
		if len(labels) > 0 {
			peer.WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(labels))
		}
		from = append(from, peer)
	}
	for _, cidr := range cidrs {
		from = append(from, networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR(cidr)))
	}
	return from
}

// cidrWithin reports whether inner lies inside outer (an IPBlock's except
// must), both valid CIDRs.
func cidrWithin(inner, outer string) bool {
	in, err1 := netip.ParsePrefix(inner)
	out, err2 := netip.ParsePrefix(outer)
	return err1 == nil && err2 == nil && in.Addr().Is4() == out.Addr().Is4() && out.Bits() <= in.Bits() && out.Contains(in.Addr())
}

// TenantRoleBinding returns the RoleBinding name that binds the ClusterRole
// role to subjects in the tenant namespace ns, labelled as the driver's.
func TenantRoleBinding(name, ns, tenant, role string, subjects []rbacv1.Subject) *rbacv1ac.RoleBindingApplyConfiguration {
	rb := rbacv1ac.RoleBinding(name, ns).
		WithLabels(map[string]string{LabelManagedBy: managedBy, LabelTenant: tenant}).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(role))
	for _, s := range subjects {
		sub := rbacv1ac.Subject().WithKind(s.Kind).WithName(s.Name)
		if s.Namespace != "" {
			sub.WithNamespace(s.Namespace)
		}
		if s.APIGroup != "" {
			sub.WithAPIGroup(s.APIGroup)
		}
		rb.WithSubjects(sub)
	}
	return rb
}

// pdb returns the PodDisruptionBudget of a process with more than one
// replica: a voluntary disruption (a node drain) leaves at least one running.
func pdb(ns string, rel runtime.Release, process string) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(ObjectName(rel.App, process), ns).
		WithLabels(labels(rel, process)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMinAvailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(rel.App, process))))
}
