package install

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"bex.co/bex/internal/kubebin"
)

// TestChartReservedHostnames renders the chart and checks that the
// controller manager and web are given the same --reserved-hostname list:
// the registry's host, the git receiver's public host and the
// reservedHostnames value, without ports, so that no tenant's Route claims
// a name the platform serves itself.
func TestChartReservedHostnames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	helm := helmTool(ctx, t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"defaults", nil, nil},
		{"values-production.yaml", []string{"-f", filepath.Join(chartDir, "values-production.yaml")},
			[]string{"registry.example.com", "git.example.com", "bex.example.com"}},
		{"ports and paths", []string{
			"--set", "registry=registry.bex.test:5000",
			"--set", "gitReceiver.publicURL=https://git.bex.test:8443/",
			"--set", "reservedHostnames={*.ops.bex.test,console.bex.test}",
		}, []string{"registry.bex.test", "git.bex.test", "*.ops.bex.test", "console.bex.test"}},
		{"the same host twice", []string{
			"--set", "registry=bex.test:5000",
			"--set", "gitReceiver.publicURL=https://bex.test",
		}, []string{"bex.test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]string{}
			for _, d := range renderDeployments(ctx, t, helm, tc.args...) {
				for _, c := range d.Spec.Template.Spec.Containers {
					repo := c.Image[strings.LastIndex(c.Image, "/")+1:]
					repo, _, _ = strings.Cut(repo, ":")
					if repo != "bex-controller-manager" && repo != "bex-web" {
						continue
					}
					hosts := []string{}
					for _, a := range c.Args {
						if h, ok := strings.CutPrefix(a, "--reserved-hostname="); ok {
							hosts = append(hosts, h)
						}
					}
					got[repo] = hosts
				}
			}
			for _, repo := range []string{"bex-controller-manager", "bex-web"} {
				hosts, ok := got[repo]
				if !ok {
					t.Fatalf("no container runs %s", repo)
				}
				if !slices.Equal(hosts, tc.want) && !(len(hosts) == 0 && len(tc.want) == 0) {
					t.Errorf("%s: --reserved-hostname %q, want %q", repo, hosts, tc.want)
				}
			}
		})
	}
}

// renderDeployments renders the chart with helm template and extra args
// (values) and returns its Deployments.
func renderDeployments(ctx context.Context, t *testing.T, helm string, args ...string) []appsv1.Deployment {
	t.Helper()
	args = append([]string{"template", "bex", chartDir, "--namespace", releaseNamespace, "--kube-version", kubebin.DefaultKubeVersion}, args...)
	out, err := runHelm(ctx, helm, args...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	var ds []appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}
