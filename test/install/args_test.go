package install

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"bex.co/bex/apiserver"
	managerapp "bex.co/bex/cmd/bex-controller-manager/app"
	edgeapp "bex.co/bex/cmd/bex-edge/app"
	gitapp "bex.co/bex/cmd/bex-git/app"
	webapp "bex.co/bex/cmd/bex-web/app"
	"bex.co/bex/internal/kubebin"
)

// command is what the chart must agree with about one binary: its flags,
// and which of its listen flags serves which probe paths.
type command struct {
	// flags binds a fresh set of the binary's options; validate, when set,
	// completes and validates them as the binary does (with the database
	// URL the chart gives through DATABASE_URL).
	flags func(fs *pflag.FlagSet) (validate func() error)
	// serves maps a listen flag to the paths served there.
	serves map[string][]string
}

// commands are the chart's images of bex binaries, by image repository.
var commands = map[string]command{
	"bex-controller-manager": {
		flags: func(fs *pflag.FlagSet) func() error {
			o := managerapp.NewOptions()
			o.AddFlags(fs)
			return func() error {
				o.DatabaseURL = "postgres://from-the-secret"
				if err := o.Complete(); err != nil {
					return err
				}
				return o.Validate()
			}
		},
		serves: map[string][]string{"health-probe-bind-address": {"/healthz", "/readyz"}, "metrics-bind-address": {"/metrics"}},
	},
	"bex-web": {
		flags: func(fs *pflag.FlagSet) func() error {
			o := webapp.NewOptions()
			o.AddFlags(fs)
			return func() error { o.DatabaseURL = "postgres://from-the-secret"; return o.Validate() }
		},
		serves: map[string][]string{"listen": {"/api/v1/healthz"}, "ops-listen": {"/healthz", "/readyz", "/metrics"}},
	},
	"bex-git": {
		flags: func(fs *pflag.FlagSet) func() error {
			o := gitapp.NewOptions()
			o.AddFlags(fs)
			return func() error { o.DatabaseURL = "postgres://from-the-secret"; o.Complete(); return o.Validate() }
		},
		serves: map[string][]string{"ops-listen": {"/healthz", "/readyz", "/metrics"}},
	},
	"bex-edge": {
		flags: func(fs *pflag.FlagSet) func() error {
			o := edgeapp.NewOptions()
			o.AddFlags(fs)
			return func() error {
				o.DatabaseURL = "postgres://from-the-secret"
				if err := o.Complete(); err != nil {
					return err
				}
				return o.Validate()
			}
		},
		serves: map[string][]string{"metrics-listen": {"/healthz", "/metrics"}},
	},
	"bex-apiserver": {
		flags: func(fs *pflag.FlagSet) func() error {
			o := apiserver.NewOptions()
			o.AddFlags(fs)
			// Complete parses --local-cluster; Validate wants the
			// serving files the Pod mounts.
			return o.Complete
		},
		serves: map[string][]string{"secure-port": {"/livez", "/readyz"}},
	},
}

// TestChartCommands renders the chart with its default and its production
// values and checks every container that runs a bex binary against that
// binary's own flag set: every arg is a flag it has, with a value it
// parses; with the production values the options also validate (the
// defaults leave registry and domain to the operator, and NOTES.txt says
// so). Every HTTP probe names a container port that one of the binary's
// listen flags binds, and a path served there. Every bex binary of the
// chart has a command line (no Deployment runs an image with nothing to
// do).
func TestChartCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	helm := helmTool(ctx, t)
	for _, values := range []string{"", "values-production.yaml", "values-production.yaml+followPlacement", "values-production.yaml+followPlacement+localCluster"} {
		args := []string{"template", "bex", chartDir, "--namespace", releaseNamespace, "--kube-version", kubebin.DefaultKubeVersion}
		name := "defaults"
		// wantArgs: per binary, args its container must have.
		wantArgs := map[string][]string{}
		if values != "" {
			name = values
			file, local := strings.CutSuffix(values, "+localCluster")
			file, follow := strings.CutSuffix(file, "+followPlacement")
			args = append(args, "-f", filepath.Join(chartDir, file))
			if follow {
				args = append(args, "--set", "followPlacement.enabled=true")
			}
			if local {
				// The management cluster runs the apps: no other
				// workload cluster.
				args = append(args, "--set", "workloadCluster.kubeconfigSecret=", "--set", "followPlacement.localCluster.name=main",
					"--set", "followPlacement.localCluster.capacity=cpu=8\\,memory=32Gi\\,pods=110",
					"--set", "followPlacement.localCluster.standby=true")
				for _, bin := range []string{"bex-controller-manager", "bex-web", "bex-git", "bex-edge"} {
					wantArgs[bin] = []string{"--workload-cluster=main"}
				}
				wantArgs["bex-apiserver"] = []string{"--local-cluster=main:cpu=8,memory=32Gi,pods=110,standby"}
			}
		}
		out, err := runHelm(ctx, helm, args...)
		if err != nil {
			t.Fatalf("helm template (%s): %v\n%s", name, err, out)
		}
		objs, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, o := range objs {
			var pod corev1.PodTemplateSpec
			switch o.GetKind() {
			case "Deployment":
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				pod = d.Spec.Template
			case "StatefulSet":
				var s appsv1.StatefulSet
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil {
					t.Fatal(err)
				}
				pod = s.Spec.Template
			default:
				continue
			}
			checkTokenStaysWithBex(t, name+": "+o.GetName(), pod.Spec)
			for _, c := range pod.Spec.Containers {
				repo := c.Image[strings.LastIndex(c.Image, "/")+1:]
				repo, _, _ = strings.Cut(repo, ":")
				cmd, ok := commands[repo]
				if !ok {
					continue
				}
				seen[repo] = true
				where := fmt.Sprintf("%s: %s/%s", name, o.GetName(), c.Name)
				checkContainer(t, where, cmd, c, values != "")
				for _, a := range wantArgs[repo] {
					if !slices.Contains(c.Args, a) {
						t.Errorf("%s: args %q lack %s", where, c.Args, a)
					}
				}
				if values != "" && slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--registry=") }) {
					checkRegistryCredentials(t, where, pod.Spec, c, "bex-registry")
				}
			}
		}
		checkTenantRBAC(t, name, readRBAC(t, objs))
		for repo := range commands {
			if !seen[repo] {
				t.Errorf("%s: no container runs %s", name, repo)
			}
		}
	}
}

// TestChartRefusesLocalClusterMisuse: followPlacement.localCluster needs
// its capacity, and cannot name this cluster while workloadCluster sends
// its apps to another one; helm says which value to change.
func TestChartRefusesLocalClusterMisuse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	helm := helmTool(ctx, t)
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no capacity", []string{"workloadCluster.kubeconfigSecret=", "followPlacement.localCluster.name=main"}, "followPlacement.localCluster.capacity is required"},
		{"another workload cluster", []string{"followPlacement.localCluster.name=main",
			"followPlacement.localCluster.capacity=cpu=8\\,memory=32Gi\\,pods=110", "workloadCluster.kubeconfigSecret=eu-1-kubeconfig"},
			"leave one of them empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "bex", chartDir, "--namespace", releaseNamespace, "--kube-version", kubebin.DefaultKubeVersion,
				"-f", filepath.Join(chartDir, "values-production.yaml"), "--set", "followPlacement.enabled=true"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := runHelm(ctx, helm, args...)
			if err == nil {
				t.Fatalf("helm template accepted %q", tc.set)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("helm template %q: %v, want it to say %q:\n%s", tc.set, err, tc.want, out)
			}
		})
	}
}

// checkTokenStaysWithBex requires that no container of another program
// (the BuildKit sidecar, whose Dockerfile steps run without a process
// sandbox; etcd) finds the pod's service-account token: the pod does not
// mount it in every container, and such a container mounts nothing at its
// path.
func checkTokenStaysWithBex(t *testing.T, where string, pod corev1.PodSpec) {
	t.Helper()
	automount := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken
	for _, c := range pod.Containers {
		repo := c.Image[strings.LastIndex(c.Image, "/")+1:]
		repo, _, _ = strings.Cut(repo, ":")
		if _, ok := commands[repo]; ok {
			continue
		}
		if automount {
			t.Errorf("%s: container %s (%s) gets the service-account token: set automountServiceAccountToken: false and mount it in bex's containers only", where, c.Name, repo)
		}
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(m.MountPath, "/var/run/secrets/kubernetes.io") {
				t.Errorf("%s: container %s (%s) mounts %s", where, c.Name, repo, m.MountPath)
			}
		}
	}
}

// checkRegistryCredentials requires that c, which talks to the app
// registry, finds the credentials of Secret secret as its docker
// configuration: DOCKER_CONFIG names a directory where that Secret's
// .dockerconfigjson is mounted as config.json.
func checkRegistryCredentials(t *testing.T, where string, pod corev1.PodSpec, c corev1.Container, secret string) {
	t.Helper()
	var dir string
	for _, e := range c.Env {
		if e.Name == "DOCKER_CONFIG" {
			dir = e.Value
		}
	}
	if dir == "" {
		t.Errorf("%s: talks to the registry without DOCKER_CONFIG", where)
		return
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != secret {
				continue
			}
			for _, it := range v.Secret.Items {
				if it.Key == corev1.DockerConfigJsonKey && it.Path == "config.json" {
					return
				}
			}
		}
	}
	t.Errorf("%s: DOCKER_CONFIG=%s is not Secret %s's %s mounted as config.json", where, dir, secret, corev1.DockerConfigJsonKey)
}

func checkContainer(t *testing.T, where string, cmd command, c corev1.Container, validate bool) {
	t.Helper()
	if len(c.Args) == 0 && len(c.Command) == 0 {
		t.Errorf("%s: no command line", where)
		return
	}
	fs := pflag.NewFlagSet(where, pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	check := cmd.flags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Errorf("%s: args %q: %v", where, c.Args, err)
		return
	}
	if validate && check != nil {
		if err := check(); err != nil {
			t.Errorf("%s: the options do not validate: %v", where, err)
		}
	}
	// Which paths each container port serves, from the listen flags.
	served := map[int32][]string{}
	for flag, paths := range cmd.serves {
		f := fs.Lookup(flag)
		if f == nil {
			t.Fatalf("%s: the binary has no --%s", where, flag)
		}
		port := f.Value.String()
		if _, p, err := net.SplitHostPort(port); err == nil {
			port = p
		}
		var n int32
		if _, err := fmt.Sscan(port, &n); err != nil {
			t.Errorf("%s: --%s=%s names no port", where, flag, f.Value)
			continue
		}
		served[n] = append(served[n], paths...)
	}
	for kind, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil {
			t.Errorf("%s: no %s probe", where, kind)
			continue
		}
		if p.HTTPGet == nil {
			continue
		}
		port := p.HTTPGet.Port.IntVal
		if name := p.HTTPGet.Port.StrVal; name != "" {
			i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == name })
			if i < 0 {
				t.Errorf("%s: %s probe names port %q, which the container does not have", where, kind, name)
				continue
			}
			port = c.Ports[i].ContainerPort
		}
		if !slices.Contains(served[port], p.HTTPGet.Path) {
			t.Errorf("%s: %s probe GET %s on port %d: the binary serves %v there", where, kind, p.HTTPGet.Path, port, served[port])
		}
	}
}
