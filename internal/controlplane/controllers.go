package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"bex.co/bex/internal/childproc"
)

// What a kubeadm control-plane node runs beside its apiserver, each with
// the identity kubeadm gives it (the bootstrap RBAC policy binds those
// users to their roles).
var controllerUsers = map[string]string{
	"kube-controller-manager": "system:kube-controller-manager",
	"kube-scheduler":          "system:kube-scheduler",
}

// StartControllers starts kube-controller-manager and kube-scheduler of
// the first apiserver's version against the plane's endpoint, as a kubeadm
// control-plane node runs them: without them nothing makes a Deployment's
// Pods, binds a Pod to a Node or gives a namespace its default
// ServiceAccount. The controller manager signs service-account tokens with
// the plane's key and runs each controller with its own service account.
// Both serve /healthz on a free loopback port; StartControllers returns
// once both answer, and Stop stops them first.
func (cp *ControlPlane) StartControllers(ctx context.Context) error {
	cp.mu.Lock()
	version := versionOr(cp.apiservers[0].Version)
	cp.mu.Unlock()
	ports, err := childproc.FreePorts("127.0.0.1", 2)
	if err != nil {
		return err
	}
	// Their serving certificates are self-signed; /healthz is open to
	// anyone (--authorization-always-allow-paths).
	client := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for i, component := range []string{"kube-controller-manager", "kube-scheduler"} {
		bin, err := cp.opts.Binaries.KubeComponent(ctx, component, version)
		if err != nil {
			return err
		}
		kubeconfig, err := cp.componentKubeconfig(component)
		if err != nil {
			return err
		}
		args := []string{bin,
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", ports[i]),
		}
		if component == "kube-controller-manager" {
			args = append(args,
				"--use-service-account-credentials=true",
				"--service-account-private-key-file="+cp.pki.saKeyFile,
				"--root-ca-file="+cp.pki.ca.CertFile,
				"--service-cluster-ip-range=10.96.0.0/12",
			)
		}
		logFile := filepath.Join(cp.dataDir, "logs", component+".log")
		fmt.Fprintf(cp.log, "starting %s v%s\n", component, version)
		proc, err := childproc.Start(childproc.Options{Name: component, Args: args, LogFile: logFile, LogMode: 0o644})
		if err != nil {
			return err
		}
		cp.mu.Lock()
		cp.controllers = append(cp.controllers, proc)
		cp.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
		err = proc.WaitReady(wctx, component, 200*time.Millisecond, func(ctx context.Context) error {
			return childproc.HTTPOK(ctx, client, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[i]))
		})
		cancel()
		if err != nil {
			return fmt.Errorf("%w\nlast lines of %s:\n%s", err, logFile, proc.Tail(15))
		}
	}
	return nil
}

// componentKubeconfig writes the kubeconfig of a control-plane component:
// its own client certificate, the plane's endpoint.
func (cp *ControlPlane) componentKubeconfig(component string) (string, error) {
	certPEM, keyPEM, err := cp.pki.clientCert(controllerUsers[component], nil)
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.dataDir, component+".kubeconfig")
	auth := &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	if err := cp.writeKubeconfigFor(path, component, auth); err != nil {
		return "", fmt.Errorf("writing the kubeconfig of %s: %w", component, err)
	}
	return path, os.Chmod(path, 0o600)
}
