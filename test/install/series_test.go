package install

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"bex.co/bex/internal/kubebin"
)

// TestChartAppMetricsToken renders the chart (defaults and production
// values): the token of the edges' per-app request counts, which hold
// every tenant's traffic, is mounted into bex-edge and bex-web only; the
// edge is told to ask for it, and bex-web reads every edge Pod through a
// headless Service that selects the edge's Pods on its metrics port.
func TestChartAppMetricsToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	helm := helmTool(ctx, t)
	for _, values := range []string{"", "values-production.yaml"} {
		args := []string{"template", "bex", chartDir, "--namespace", releaseNamespace, "--kube-version", kubebin.DefaultKubeVersion}
		if values != "" {
			args = append(args, "-f", filepath.Join(chartDir, values))
		}
		out, err := runHelm(ctx, helm, args...)
		if err != nil {
			t.Fatalf("helm template %s: %v\n%s", values, err, out)
		}
		objs, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		const secret = "bex-app-metrics-token"
		var headless *corev1.Service
		secretMade := false
		mountedBy := map[string]bool{}
		var edgeArgs, webArgs []string
		for _, o := range objs {
			switch o.GetKind() {
			case "Secret":
				secretMade = secretMade || o.GetName() == secret
			case "Service":
				if o.GetName() == "bex-edge-metrics-pods" {
					headless = &corev1.Service{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, headless); err != nil {
						t.Fatal(err)
					}
				}
			case "Deployment":
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Secret != nil && v.Secret.SecretName == secret {
						mountedBy[d.Name] = true
					}
				}
				for _, c := range d.Spec.Template.Spec.Containers {
					switch {
					case strings.Contains(c.Image, "bex-edge"):
						edgeArgs = c.Args
					case strings.Contains(c.Image, "bex-web"):
						webArgs = c.Args
					}
				}
			}
		}
		name := "defaults " + values
		if !secretMade {
			t.Errorf("%s: no Secret %s", name, secret)
		}
		for d := range mountedBy {
			if d != "bex-edge" && d != "bex-web" {
				t.Errorf("%s: Deployment %s mounts the edges' token %s", name, d, secret)
			}
		}
		if !mountedBy["bex-edge"] || !mountedBy["bex-web"] {
			t.Errorf("%s: the token is mounted by %v, want bex-edge and bex-web", name, mountedBy)
		}
		if !slices.Contains(edgeArgs, "--app-metrics-token-file=/etc/bex/app-metrics/token") {
			t.Errorf("%s: bex-edge's args %v serve no request counts", name, edgeArgs)
		}
		if !slices.Contains(webArgs, "--edge-metrics=bex-edge-metrics-pods."+releaseNamespace+".svc:9090") ||
			!slices.Contains(webArgs, "--edge-metrics-token-file=/etc/bex/app-metrics/token") {
			t.Errorf("%s: bex-web's args %v do not read the edges", name, webArgs)
		}
		if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || headless.Spec.Selector["app.kubernetes.io/component"] != "edge" ||
			len(headless.Spec.Ports) != 1 || headless.Spec.Ports[0].Port != 9090 {
			t.Errorf("%s: the edges' headless Service: %+v", name, headless)
		}
	}
}
