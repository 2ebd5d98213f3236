package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

const takenOver = "bex: the control plane is Cluster API's"

// TestManagedControlPlane runs make run with --managed-control-plane:
// once Cluster API's managers run, the cluster default/management (three
// LocalMachines that take the platform's plane over) serves the plane and
// its first kube-apiserver stops; what the plane stored and issued before
// (a ConfigMap, a ServiceAccount token, the admin's client certificate)
// stays valid on the machines, which run the plane's controller manager
// and scheduler; the platform works on (a tenant's app is created), the
// cluster is the fleet's management cluster and cannot be
// deleted; after a restart on the same state directory the machines serve
// the plane again, its first kube-apiserver stops again, and the app is
// still there.
func TestManagedControlPlane(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex-node")
	state := t.TempDir()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	p := platformtest.Start(ctx, t, bin, state, dbURL, "--managed-control-plane")
	env := p.WaitEnv(ctx, t)
	start := time.Now()
	token := storeBeforeTakeover(t, p, env["BEX_KUBECONFIG"])
	waitTakeover(t, p)
	t.Logf("the machines took the plane over %s after the platform was ready", time.Since(start).Round(time.Second))
	machines := checkPlaneServed(t, env["BEX_KUBECONFIG"])
	checkStoredBeforeTakeover(t, env["BEX_KUBECONFIG"], token)

	api, err := apiclient.New(env["BEX_API"], env["BEX_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: "site"}); err != nil {
		t.Fatalf("creating an app on the plane's machines: %v", err)
	}
	op, err := apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.DeleteLocalCluster(ctx, "management"); err == nil || !strings.Contains(err.Error(), "serves the platform's own control plane") {
		t.Errorf("deleting the cluster that serves the plane: %v, want a refusal", err)
	}

	// A restart: the first kube-apiserver serves until the machines do.
	p.Interrupt(t)
	p = platformtest.Start(ctx, t, bin, state, dbURL, "--managed-control-plane")
	env = p.WaitEnv(ctx, t)
	start = time.Now()
	waitTakeover(t, p)
	t.Logf("after a restart, the machines served the plane again %s after the platform was ready", time.Since(start).Round(time.Second))
	if again := checkPlaneServed(t, env["BEX_KUBECONFIG"]); !slices.Equal(again, machines) {
		t.Errorf("after the restart the plane is served by %v, before by %v: want the same machines", again, machines)
	}
	if _, err := api.GetApp(ctx, "site"); err != nil {
		t.Errorf("the app created before the restart: %v", err)
	}
}

// storeBeforeTakeover stores a ConfigMap and issues a ServiceAccount token
// through the plane's first kube-apiserver, with the admin's kubeconfig,
// and returns the token. It fails t if the machines had served the plane
// by then.
func storeBeforeTakeover(t *testing.T, p *platformtest.Platform, kubeconfig string) string {
	t.Helper()
	ctx := context.Background()
	admin := kubeClient(t, kubeconfig)
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "before-takeover"}, Data: map[string]string{"k": "v"}}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant-tool"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "tenant-tool",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Output(), takenOver) {
		t.Fatal("the machines served the plane before the test stored anything through its first kube-apiserver")
	}
	return tr.Status.Token
}

// checkStoredBeforeTakeover checks through the plane's endpoint, now served
// by the machines, that what storeBeforeTakeover stored and issued is
// still there and valid on each of them, and that they run the plane's
// kube-controller-manager and kube-scheduler.
func checkStoredBeforeTakeover(t *testing.T, kubeconfig, token string) {
	t.Helper()
	ctx := context.Background()
	admin := kubeClient(t, kubeconfig)
	// Every machine answers: each request goes to the next backend.
	for range 6 {
		cm, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "before-takeover", metav1.GetOptions{})
		if err != nil || cm.Data["k"] != "v" {
			t.Fatalf("the ConfigMap stored before the takeover: %v, %v", cm, err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	tokenCfg := rest.AnonymousClientConfig(cfg)
	tokenCfg.BearerToken = token
	tool, err := kubernetes.NewForConfig(tokenCfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		review, err := tool.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the ServiceAccount token issued before the takeover: %v", err)
		}
		if got := review.Status.UserInfo.Username; got != "system:serviceaccount:default:tenant-tool" {
			t.Fatalf("the token authenticates as %q", got)
		}
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := platformtest.Client(t, kubeconfig).Get(ctx, client.ObjectKey{Namespace: "default", Name: "management-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	localinfratest.CheckComponents(t, admin, kcp.Spec.Version)
}

// kubeClient returns a clientset for kubeconfig.
func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// waitTakeover waits until the platform says the machines serve its plane.
func waitTakeover(t *testing.T, p *platformtest.Platform) {
	t.Helper()
	platformtest.Eventually(t, 12*time.Minute, "the machines to take the plane over", func(context.Context) error {
		out := p.Output()
		if strings.Contains(out, takenOver) {
			return nil
		}
		if i := strings.Index(out, "Cluster API did not take the control plane over"); i >= 0 {
			t.Fatalf("the takeover failed:\n%s", out[i:])
		}
		return errors.New("make run has not said the plane is Cluster API's")
	})
}

// checkPlaneServed checks that the cluster default/management is the
// fleet's management cluster, that it takes the plane over with three
// ready LocalMachines, and that their kube-apiservers are the plane's
// only ones (its identity leases); it returns the machines' names.
func checkPlaneServed(t *testing.T, kubeconfig string) []string {
	t.Helper()
	ctx := context.Background()
	mgmt := platformtest.Client(t, kubeconfig)
	kube := kubeClient(t, kubeconfig)
	cl := &clusterv1.Cluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: "management"}, cl); err != nil {
		t.Fatal(err)
	}
	if cl.Labels[plan.ManagementLabel] != "true" {
		t.Errorf("cluster management's labels %v: want it marked the management cluster", cl.Labels)
	}
	lc := &infrav1.LocalCluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: "management"}, lc); err != nil {
		t.Fatal(err)
	}
	if lc.Spec.Plane != "management" {
		t.Errorf("LocalCluster management takes over plane %q, want management", lc.Spec.Plane)
	}
	var names []string
	platformtest.Eventually(t, 2*time.Minute, "three ready LocalMachines whose kube-apiservers alone serve the plane", func(ctx context.Context) error {
		var lms infrav1.LocalMachineList
		if err := mgmt.List(ctx, &lms, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: "management"}); err != nil {
			return err
		}
		names = nil
		for _, lm := range lms.Items {
			if err := platformtest.HasCondition(lm.Status.Conditions, infrav1.ReadyCondition, "True", ""); err != nil {
				return fmt.Errorf("LocalMachine %s: %w", lm.Name, err)
			}
			names = append(names, lm.Name)
		}
		leases, err := kube.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
		if err != nil {
			return err
		}
		var hosts []string
		for _, l := range leases.Items {
			hosts = append(hosts, l.Labels["kubernetes.io/hostname"])
		}
		slices.Sort(names)
		slices.Sort(hosts)
		if len(names) != 3 || !slices.Equal(hosts, names) {
			return fmt.Errorf("LocalMachines %v, kube-apiservers %v", names, hosts)
		}
		return nil
	})
	return names
}
