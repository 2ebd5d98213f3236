package nodetest

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pki"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/node"
	"bex.co/bex/test/platformtest"
)

const (
	// NodeName is the node's name, and its Pods' spec.nodeName.
	NodeName = "worker-1"
	// RegistryToken is the registry's token, its one credential's password
	// (registry.Auth).
	RegistryToken = "s3cret"
	// KubeletClient is the common name of the apiserver's client
	// certificate for the node's API, bound to system:kubelet-api-admin
	// as kubeadm binds it.
	KubeletClient = "kube-apiserver-kubelet-client"
	// KubeletVersion is what the node reports in its nodeInfo.
	KubeletVersion = "v1.37.2"
)

// Fixture is a running cluster of one bex-node.
type Fixture struct {
	// CP is the control plane: its RESTConfig is the cluster admin's.
	CP *controlplane.ControlPlane
	// Admin is a clientset of the cluster admin.
	Admin kubernetes.Interface
	// CA signs the node's serving certificate and the apiserver's client
	// certificate for the node's API: a client of the node's API trusts
	// it, and the node trusts the clients it signed.
	CA *pki.KeyPair
	// Port is the node's API port, on 127.0.0.1.
	Port int
	// Registry is the registry's host:port (plain HTTP, on loopback); it
	// wants RegistryToken.
	Registry string
	// Image is the test app (runtimetest's) by tag in the registry, an
	// image with its own root file system; AppImage is the same app as a
	// Go stack's image, run on the run base (which has a shell).
	Image, AppImage string
	// StateDir is the node's state directory (node.Options.StateDir).
	StateDir string
	// BinDir is the platform's binary directory (bex-static,
	// bex-build-agent), node.Options.PlatformBinDir.
	BinDir string

	mu    sync.Mutex
	opts  node.Options // the running agent's, before node.New completes them
	agent *runningAgent
}

type runningAgent struct {
	cancel context.CancelFunc
	done   chan error
}

// Start starts a Fixture, its agent running; configure, when given,
// changes the agent's options before it starts. Everything stops at the
// end of t.
func Start(t testing.TB, configure ...func(f *Fixture, o *node.Options)) *Fixture {
	t.Helper()
	sandboxtest.Require(t)
	dir := t.TempDir()
	ca, err := pki.NewCA(pki.Spec{CommonName: "bex-node-test-ca", NotAfter: time.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's client of the agent, and how it checks the agent.
	client, err := ca.Issue(pki.Spec{CommonName: KubeletClient, NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	files := pki.Files{CertFile: filepath.Join(dir, "kubelet-client.crt"), KeyFile: filepath.Join(dir, "kubelet-client.key")}
	if err := files.Write(client); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	// PodLogsQuerySplitStreams: the apiserver passes a log request's
	// stream on to the node, which serves it, as bex fleet create's
	// clusters do.
	cp := cptest.StartBare(t, controlplane.APIServerSpec{FeatureGates: map[string]bool{"PodLogsQuerySplitStreams": true}, ExtraArgs: []string{
		"--authorization-mode=Node,RBAC", // in place of the plane's RBAC, as kubeadm's
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + files.CertFile,
		"--kubelet-client-key=" + files.KeyFile,
		"--kubelet-certificate-authority=" + caFile,
		"--kubelet-preferred-address-types=InternalIP",
	}})
	ctx := context.Background()
	// What makes a Deployment's Pods and binds them to the node.
	if err := cp.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// What kubeadm binds for the apiserver's kubelet client.
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: KubeletClient}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	reg, err := registry.New(filepath.Join(dir, "registry"), RegistryToken)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(srv.Close)
	f := &Fixture{CP: cp, Admin: admin, CA: ca, Registry: strings.TrimPrefix(srv.URL, "http://"), StateDir: filepath.Join(dir, "node")}
	f.Image = f.Registry + "/tenant-a/testapp:1"
	runtimetest.PushTestApp(t, f.Image, dir, f.RegistryAuth(), nil)
	f.AppImage = f.Registry + "/suite/testapp:1"
	runtimetest.PushTestApp(t, f.AppImage, dir, f.RegistryAuth(), map[string]string{build.LabelStack: "go"})

	ports, err := childproc.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	f.Port = ports[0]
	// The platform's binary directory, as make build's bin/ (bex-static,
	// bex-build-agent): containers on the run base see it read-only, as
	// bex-node's --platform-bin-dir has it.
	f.BinDir = platformtest.BuildBinaries(t, "bex-static", "bex-build-agent")
	if err := os.Chmod(f.BinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(pki.Spec{CommonName: NodeName, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	nodeCfg, err := cp.UserConfig("system:node:"+NodeName, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	nodeClient, err := kubernetes.NewForConfig(nodeCfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := node.Options{
		Client: nodeClient, NodeName: NodeName, Address: netip.MustParseAddr("127.0.0.1"), Port: f.Port,
		ServingCert: serving.TLSCertificate(), ClientCAs: ca.Pool(),
		Sandbox:        sandboxtest.New(t, f.SandboxOptions()),
		StateDir:       f.StateDir,
		PlatformBinDir: f.BinDir,
		KubeletVersion: KubeletVersion,
		RestartBackoff: 500 * time.Millisecond,
		LeaseDuration:  8 * time.Second,
		StatusInterval: 5 * time.Second,
		Log:            testr.NewWithInterface(t, testr.Options{}),
	}
	for _, c := range configure {
		c(f, &opts)
	}
	// The agent's containers outlive it: the node's are removed once the
	// last agent stopped, before the sandbox closes.
	t.Cleanup(func() {
		if err := node.Reset(f.Options().Sandbox, f.StateDir); err != nil {
			t.Errorf("resetting the node: %v", err)
		}
	})
	// Registered after the sandbox's: the agent stops before its sandbox
	// closes.
	t.Cleanup(func() {
		if err := f.stopAgent(); err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	f.StartAgent(t, opts)
	return f
}

// SandboxOptions are those of the agent's sandbox Manager: its slot is
// the state directory's (Owner), so that a Manager made anew with them,
// once the last one is released, finds the containers the agents left
// running, as a bex-node process that starts again does.
func (f *Fixture) SandboxOptions() sandbox.Options {
	return sandbox.Options{StateDir: filepath.Join(filepath.Dir(f.StateDir), "sandbox"),
		ReadOnlyPaths: []string{f.BinDir}, Owner: f.StateDir}
}

// Options returns the options the running agent (or the last one) was
// started with, to start another like it.
func (f *Fixture) Options() node.Options {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts
}

// StartAgent starts an agent with opts (those of Options, changed as the
// test wants). The fixture's agent must be stopped (StopAgent); it stops
// at the end of the test that started the fixture.
func (f *Fixture) StartAgent(t testing.TB, opts node.Options) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.agent != nil {
		t.Fatal("nodetest: an agent runs already; StopAgent first")
	}
	a, err := node.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningAgent{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	f.opts, f.agent = opts, r
}

// StopAgent stops the running agent and waits until its Run returned;
// its error fails t.
func (f *Fixture) StopAgent(t testing.TB) {
	t.Helper()
	if err := f.stopAgent(); err != nil {
		t.Errorf("agent: %v", err)
	}
}

func (f *Fixture) stopAgent() error {
	f.mu.Lock()
	r := f.agent
	f.agent = nil
	f.mu.Unlock()
	if r == nil {
		return nil
	}
	r.cancel()
	return <-r.done
}

// RestartAgent restarts the agent as bex-node restarts on its machine:
// it stops the running agent, gives its sandbox slot up with the
// containers running (sandbox.Manager.Release), calls configure when
// given (while no agent runs), and starts a new agent with the same
// options (the same state directory, port and certificates) and a
// sandbox Manager of its own on the same slot (SandboxOptions), which
// adopts the containers.
func (f *Fixture) RestartAgent(t testing.TB, configure ...func(o *node.Options)) {
	t.Helper()
	f.StopAgent(t)
	opts := f.Options()
	opts.Sandbox.Release()
	for _, c := range configure {
		c(&opts)
	}
	opts.Sandbox = sandboxtest.New(t, f.SandboxOptions())
	// Registered after the new sandbox's: the agent stops before it
	// closes.
	t.Cleanup(func() { f.StopAgent(t) })
	f.StartAgent(t, opts)
}

// RegistryAuth is the registry's credential.
func (f *Fixture) RegistryAuth() authn.Authenticator { return registry.Auth(RegistryToken) }

// Keychain is the registry's credential for the registry's host, as a
// node's own credentials (node.Options.Keychain): with it the node pulls
// the images of Pods that name no pull secret, as the kube driver's.
func (f *Fixture) Keychain() authn.Keychain { return build.Keychain(f.Registry, f.RegistryAuth()) }

// PullSecret makes, once, a dockerconfigjson Secret "registry" in ns with
// the registry's token, and returns its name.
func (f *Fixture) PullSecret(t testing.TB, ns string) string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(registry.Username + ":" + RegistryToken))
	b, err := json.Marshal(map[string]any{"auths": map[string]any{f.Registry: map[string]string{"auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Admin.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "registry"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: b},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return "registry"
}

// Namespace makes the namespace ns, if it is not there, with its default
// ServiceAccount, which the ServiceAccount admission wants of a Pod made
// before the controller manager's ServiceAccount controller got to it.
func (f *Fixture) Namespace(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := f.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// PushAppImage pushes AppImage again as ref (a repository and tag of the
// registry, like "acme/shop:2") and returns it with the registry's host:
// another release's image, which the node pulls and unpacks on its own.
func (f *Fixture) PushAppImage(t testing.TB, ref string) string {
	t.Helper()
	src, err := name.ParseReference(f.AppImage)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(src, remote.WithAuth(f.RegistryAuth()))
	if err != nil {
		t.Fatal(err)
	}
	full := f.Registry + "/" + ref
	dst, err := name.ParseReference(full)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, img, remote.WithAuth(f.RegistryAuth())); err != nil {
		t.Fatal(err)
	}
	return full
}

// Get asks url with a 2 s timeout and returns the status and body: what a
// client on the node's machine gets from a Pod's IP.
func Get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
