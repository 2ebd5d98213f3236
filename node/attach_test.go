package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"bex.co/bex/internal/pki"
	"bex.co/bex/test/platformtest"
)

// TestAttach attaches to Pods' containers through the apiserver's
// pods/attach, as kubectl attach and the kube driver's one-off runs do:
// a container made with stdin and stdinOnce reads what the client sends,
// over SPDY and over WebSocket,
// its output from its first line comes back (its process waits for the
// attach) and its exit code with it; one on a terminal has the client's
// size; one made without stdin is refused saying so; and the node turns
// away a client the apiserver does not allow to create nodes/proxy, even
// one that may read the logs.
func TestAttach(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "tenant-a"
	f.Namespace(t, ns)
	pull := f.PullSecret(t, ns)
	run := func(t *testing.T, name string, configure func(c *corev1.Container), args ...string) {
		t.Helper()
		p := f.webPod(ns, name, pull)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		c := &p.Spec.Containers[0]
		c.Image = f.AppImage // the run base, which has a shell
		c.EnvFrom, c.Env, c.Ports, c.ReadinessProbe, c.LivenessProbe = nil, nil, nil, nil, nil
		c.Command = args
		configure(c)
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 90*time.Second, "the container runs", func(ctx context.Context) error {
			p, err := f.getPod(ctx, ns, name)
			if err != nil {
				return err
			}
			if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil {
				return fmt.Errorf("container statuses %+v", cs)
			}
			return nil
		})
	}
	// attachWith attaches with client-go's SPDY executor, as the kube
	// driver does, or, webSocket, with its WebSocket one, as kubectl
	// attach does since 1.31: the apiserver then speaks WebSocket to the
	// client and SPDY to the node.
	attachWith := func(webSocket bool, name string, opts *corev1.PodAttachOptions, streams remotecommand.StreamOptions) error {
		opts.Container = "web"
		req := f.Admin.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("attach").
			VersionedParams(opts, scheme.ParameterCodec)
		var ex remotecommand.Executor
		var err error
		if webSocket {
			ex, err = remotecommand.NewWebSocketExecutor(f.CP.RESTConfig(), http.MethodGet, req.URL().String())
		} else {
			ex, err = remotecommand.NewSPDYExecutor(f.CP.RESTConfig(), http.MethodPost, req.URL())
		}
		if err != nil {
			return err
		}
		return ex.StreamWithContext(ctx, streams)
	}
	attach := func(name string, opts *corev1.PodAttachOptions, streams remotecommand.StreamOptions) error {
		return attachWith(false, name, opts, streams)
	}

	// catOnce runs, in a stdinOnce container named pod, a shell that says
	// it is ready, copies its input and says done on stderr, and attaches
	// to it with input, over WebSocket or SPDY: all of it must come back,
	// with the exit code.
	catOnce := func(t *testing.T, webSocket bool, pod string) {
		t.Helper()
		run(t, pod, func(c *corev1.Container) { c.Stdin, c.StdinOnce = true, true },
			"/bin/sh", "-c", "echo ready; cat; echo done >&2; exit 3")
		var stdout, stderr strings.Builder
		err := attachWith(webSocket, pod, &corev1.PodAttachOptions{Stdin: true, Stdout: true, Stderr: true},
			remotecommand.StreamOptions{Stdin: strings.NewReader("hello\nworld\n"), Stdout: &stdout, Stderr: &stderr})
		var exit exec.CodeExitError
		if !errors.As(err, &exit) || exit.Code != 3 {
			t.Errorf("the attach ended with %v, want exit code 3", err)
		}
		if stdout.String() != "ready\nhello\nworld\n" || stderr.String() != "done\n" {
			t.Errorf("stdout %q, stderr %q; want ready, hello, world and done", stdout.String(), stderr.String())
		}
	}

	t.Run("StdinOnce", func(t *testing.T) {
		catOnce(t, false, "cat-1")
		// Its one attach is over.
		err := attach("cat-1", &corev1.PodAttachOptions{Stdout: true}, remotecommand.StreamOptions{Stdout: io.Discard})
		if err == nil {
			t.Error("a second attach to a stdinOnce container that ended was let in")
		}
	})

	t.Run("WebSocket", func(t *testing.T) { catOnce(t, true, "cat-ws") })

	t.Run("Terminal", func(t *testing.T) {
		run(t, "tty-1", func(c *corev1.Container) { c.Stdin, c.StdinOnce, c.TTY = true, true, true },
			"/bin/sh", "-c", "stty size; read line; echo \"got $line\"")
		in, typed := io.Pipe()
		defer typed.Close()
		var out platformtest.SyncBuffer
		done := make(chan error, 1)
		go func() {
			done <- attach("tty-1", &corev1.PodAttachOptions{Stdin: true, Stdout: true, TTY: true},
				remotecommand.StreamOptions{Stdin: in, Stdout: &out, Tty: true, TerminalSizeQueue: &sizes{{Width: 132, Height: 50}}})
		}()
		platformtest.Eventually(t, 30*time.Second, "the shell sees the client's size", func(context.Context) error {
			if !strings.Contains(out.String(), "50 132") {
				return fmt.Errorf("output %q", out.String())
			}
			return nil
		})
		if _, err := io.WriteString(typed, "hi\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil || !strings.Contains(out.String(), "got hi") {
				t.Errorf("the attach ended with %v, output %q; want success and got hi", err, out.String())
			}
		case <-ctx.Done():
			t.Fatalf("the attach did not end: output %q", out.String())
		}
	})

	t.Run("WithoutStdin", func(t *testing.T) {
		run(t, "nostdin-1", func(*corev1.Container) {}, "/bin/sh", "-c", "echo up; exec sleep 600")
		err := attach("nostdin-1", &corev1.PodAttachOptions{Stdout: true}, remotecommand.StreamOptions{Stdout: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "stdin: true") {
			t.Errorf("an attach to a container without stdin: %v; want it refused saying it needs stdin: true", err)
		}
	})

	// The apiserver's kubelet client may create nodes/proxy; a user that
	// may only get it (the logs) may not attach.
	t.Run("OnlyForAuthorizedClients", func(t *testing.T) {
		run(t, "cat-2", func(c *corev1.Container) { c.Stdin = true }, "/bin/sh", "-c", "echo up; exec cat")
		const user = "log-reader"
		if _, err := f.Admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cert, err := f.CA.Issue(pki.Spec{CommonName: user, NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: f.CA.Pool(), Certificates: []tls.Certificate{cert.TLSCertificate()}}}}
		do := func(method, path string) (int, string) {
			req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("https://127.0.0.1:%d%s", f.Port, path), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		platformtest.Eventually(t, 30*time.Second, "the user reads the logs", func(context.Context) error {
			if code, body := do(http.MethodGet, "/containerLogs/"+ns+"/cat-2/web"); code != http.StatusOK || body != "up\n" {
				return fmt.Errorf("%d %q", code, body)
			}
			return nil
		})
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			code, body := do(method, "/attach/"+ns+"/cat-2/web?input=1&output=1")
			if code != http.StatusForbidden || !strings.Contains(body, "verb=create") {
				t.Errorf("%s /attach as a user that may get nodes/proxy only: %d %q; want 403", method, code, body)
			}
		}
	})
}

// sizes gives its terminal sizes once each, then none.
type sizes []remotecommand.TerminalSize

func (s *sizes) Next() *remotecommand.TerminalSize {
	if len(*s) == 0 {
		return nil
	}
	sz := (*s)[0]
	*s = (*s)[1:]
	return &sz
}
