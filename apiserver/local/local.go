package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"bex.co/bex/apiserver"
	"bex.co/bex/apiserver/registration"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubeapply"
)

// DefaultLocalCluster is embedded mode's process runtime as a static
// cluster of the fleet, on standby: it takes new apps only while no Cluster
// API cluster can run them, and keeps those it has.
const DefaultLocalCluster = "local:cpu=4,memory=8Gi,pods=110,standby"

// User is bex-apiserver's identity in the control plane.
const User = "bex-apiserver"

// Options configures Start.
type Options struct {
	// ControlPlane to register with; bex-apiserver stores its objects in
	// its etcd. Required.
	ControlPlane *controlplane.ControlPlane
	// Dir keeps the serving certificate and the server's kubeconfig
	// between runs. Required.
	Dir string
	// LocalClusters are the static clusters (--local-cluster); nil means
	// DefaultLocalCluster, empty (non-nil) none.
	LocalClusters []string
	// Args are further bex-apiserver flags, such as "--scoring=spread".
	Args []string
	// Port is the port on 127.0.0.1 to serve on; zero picks a free one.
	Port int
	// Timeout bounds start and registration; zero means two minutes.
	Timeout time.Duration
}

// Server is a running, registered bex-apiserver.
type Server struct {
	// URL of bex-apiserver itself (not through the aggregator).
	URL string
	// CAFile is the CA of its serving certificate.
	CAFile string

	cancel context.CancelFunc
	done   chan error
}

// Start starts bex-apiserver and registers it. It runs until ctx ends or
// Stop is called.
func Start(ctx context.Context, o Options) (_ *Server, err error) {
	if o.ControlPlane == nil || o.Dir == "" {
		return nil, errors.New("local bex-apiserver: ControlPlane and Dir are required")
	}
	if o.LocalClusters == nil {
		o.LocalClusters = []string{DefaultLocalCluster}
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	cp := o.ControlPlane
	admin := cp.RESTConfig()
	startCtx, cancelStart := context.WithTimeout(ctx, o.Timeout)
	defer cancelStart()

	if _, err := kubeapply.InstallCRDs(startCtx, admin, capicrds.CRDs()); err != nil {
		return nil, fmt.Errorf("installing Cluster API CRDs: %w", err)
	}
	cert, err := registration.EnsureServingCert(o.Dir, registration.DefaultServiceName, registration.DefaultNamespace)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := writeKubeconfig(cp, filepath.Join(o.Dir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: User}
	if err := registration.GrantAccess(startCtx, admin, subject); err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)))
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	opts := apiserver.NewOptions()
	fs := pflag.NewFlagSet("bex-apiserver", pflag.ContinueOnError)
	opts.AddFlags(fs)
	etcdCA, etcdCert, etcdKey := cp.EtcdClient()
	args := []string{
		"--etcd-servers=" + cp.EtcdURL(),
		"--etcd-cafile=" + etcdCA,
		"--etcd-certfile=" + etcdCert,
		"--etcd-keyfile=" + etcdKey,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + cert.CertFile,
		"--tls-private-key-file=" + cert.KeyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
	}
	for _, c := range o.LocalClusters {
		args = append(args, "--local-cluster="+c)
	}
	if err := fs.Parse(append(args, o.Args...)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("bex-apiserver flags: %w", err)
	}
	opts.RecommendedOptions.SecureServing.Listener = ln
	if err := opts.Complete(); err != nil {
		ln.Close()
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		ln.Close()
		return nil, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	s := &Server{URL: "https://127.0.0.1:" + strconv.Itoa(port), CAFile: cert.CAFile, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- opts.Run(runCtx) }()
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()

	if err := registration.Register(startCtx, admin, registration.Options{
		ExternalName: "localhost",
		Port:         int32(port),
		CABundle:     cert.CA,
		Subject:      subject,
	}); err != nil {
		return nil, err
	}
	if err := s.waitReady(startCtx, admin); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady polls bex-apiserver's /readyz directly: ready means its
// post-start hooks ran, so the fleet and placement caches are synced.
func (s *Server) waitReady(ctx context.Context, admin *rest.Config) error {
	cfg := s.DirectConfig(admin)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return fmt.Errorf("building TLS config: %w", err)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	var last error
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-s.done:
			s.done <- err
			return false, fmt.Errorf("bex-apiserver stopped: %w", err)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		last = fmt.Errorf("/readyz: %s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for bex-apiserver to be ready (last: %v): %w", last, err)
	}
	return nil
}

// DirectConfig returns base (a config of the control plane, with its
// client credentials) pointed at bex-apiserver itself, bypassing the
// aggregator: for measuring what the aggregator costs.
func (s *Server) DirectConfig(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Host = s.URL
	cfg.CAFile, cfg.CAData = s.CAFile, nil
	cfg.ServerName = ""
	return cfg
}

// Stop stops the server and waits for it to end. It leaves the
// registration in place: a restarted server takes it over.
func (s *Server) Stop() error {
	s.cancel()
	err := <-s.done
	s.done <- err
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// writeKubeconfig writes a kubeconfig with a client certificate for User.
func writeKubeconfig(cp *controlplane.ControlPlane, path string) (string, error) {
	cfg, err := cp.UserConfig(User)
	if err != nil {
		return "", fmt.Errorf("creating bex-apiserver credentials: %w", err)
	}
	ca, err := os.ReadFile(cp.CAFile())
	if err != nil {
		return "", fmt.Errorf("reading cluster CA: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bex"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[User] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["bex"] = &clientcmdapi.Context{Cluster: "bex", AuthInfo: User}
	kc.CurrentContext = "bex"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing bex-apiserver kubeconfig: %w", err)
	}
	return path, nil
}
