package install

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"bex.co/bex/internal/kubebin"
)

// TestChartEdgeDNS01 renders the chart with acme.rfc2136 set and checks
// that bex-edge is given every --acme-dns-rfc2136-* flag its flag set
// parses, with the TSIG secret file being the named Secret's key mounted
// read-only; and that the flags are absent by default.
func TestChartEdgeDNS01(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	helm := helmTool(ctx, t)
	edge := func(t *testing.T, values ...string) (corev1.PodSpec, corev1.Container) {
		t.Helper()
		var set []string
		for _, v := range values {
			set = append(set, "--set", v)
		}
		for _, d := range renderDeployments(ctx, t, helm, set...) {
			for _, c := range d.Spec.Template.Spec.Containers {
				if strings.Contains(c.Image, "/bex-edge:") || strings.HasPrefix(c.Image, "bex-edge:") {
					return d.Spec.Template.Spec, c
				}
			}
		}
		t.Fatal("no container runs bex-edge")
		return corev1.PodSpec{}, corev1.Container{}
	}
	flags := func(c corev1.Container) map[string]string {
		m := map[string]string{}
		for _, a := range c.Args {
			if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--acme-dns-rfc2136-") {
				m[k] = v
			}
		}
		return m
	}

	t.Run("off by default", func(t *testing.T) {
		if _, c := edge(t); len(flags(c)) != 0 {
			t.Errorf("bex-edge has DNS-01 flags without acme.rfc2136: %v", flags(c))
		}
	})
	t.Run("set", func(t *testing.T) {
		pod, c := edge(t, "acme.rfc2136.server=ns1.example.com:53", "acme.rfc2136.zone=apps.example.com",
			"acme.rfc2136.tsigKey=bex-acme", "acme.rfc2136.tsigSecretName=bex-acme-tsig")
		checkContainer(t, "bex-edge", commands["bex-edge"], c, false)
		got := flags(c)
		for k, want := range map[string]string{
			"--acme-dns-rfc2136-server":         "ns1.example.com:53",
			"--acme-dns-rfc2136-zone":           "apps.example.com",
			"--acme-dns-rfc2136-tsig-key":       "bex-acme",
			"--acme-dns-rfc2136-tsig-algorithm": "hmac-sha256",
		} {
			if got[k] != want {
				t.Errorf("%s=%q, want %q", k, got[k], want)
			}
		}
		file := got["--acme-dns-rfc2136-tsig-secret-file"]
		for _, m := range c.VolumeMounts {
			if !strings.HasPrefix(file, m.MountPath+"/") {
				continue
			}
			for _, v := range pod.Volumes {
				if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != "bex-acme-tsig" || !m.ReadOnly {
					continue
				}
				for _, it := range v.Secret.Items {
					if it.Key == "secret" && m.MountPath+"/"+it.Path == file {
						return
					}
				}
			}
		}
		t.Errorf("--acme-dns-rfc2136-tsig-secret-file=%s is not Secret bex-acme-tsig's key \"secret\" mounted read-only", file)
	})
	t.Run("a server without a zone is refused", func(t *testing.T) {
		args := []string{"template", "bex", chartDir, "--namespace", releaseNamespace, "--kube-version", kubebin.DefaultKubeVersion,
			"--set", "acme.rfc2136.server=ns1.example.com:53", "--set", "acme.rfc2136.tsigKey=k", "--set", "acme.rfc2136.tsigSecretName=s"}
		out, err := runHelm(ctx, helm, args...)
		if err == nil || !strings.Contains(string(out), "acme.rfc2136.zone is required") {
			t.Errorf("helm template with no zone: %v\n%s\nwant it refused, naming acme.rfc2136.zone", err, out)
		}
	})
}
