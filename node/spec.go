package node

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/sandbox"
)

// admit says what of pod bex-node does not run, nil when it runs it all.
// docs/fleet.md lists the same.
func admit(pod *corev1.Pod) error {
	s := pod.Spec
	var no []string
	if len(s.Containers) != 1 {
		no = append(no, fmt.Sprintf("%d containers (it runs one a pod)", len(s.Containers)))
	}
	if len(s.InitContainers) > 0 {
		no = append(no, "init containers")
	}
	if len(s.EphemeralContainers) > 0 {
		no = append(no, "ephemeral containers")
	}
	if s.HostNetwork || s.HostPID || s.HostIPC {
		no = append(no, "the host's namespaces")
	}
	no = append(no, admitVolumes(s)...)
	for _, c := range s.Containers {
		for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p != nil && p.HTTPGet == nil && p.TCPSocket == nil {
				no = append(no, fmt.Sprintf("a %s probe of container %q that is not httpGet or tcpSocket", what, c.Name))
			}
		}
		if l := c.Lifecycle; l != nil {
			if l.PostStart != nil {
				no = append(no, fmt.Sprintf("a postStart hook in container %q", c.Name))
			}
			if h := l.PreStop; h != nil && (h.Exec != nil || h.HTTPGet != nil || h.TCPSocket != nil) {
				no = append(no, fmt.Sprintf("a preStop hook of container %q that is not sleep", c.Name))
			}
			if l.StopSignal != nil {
				no = append(no, fmt.Sprintf("a stop signal in container %q", c.Name))
			}
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				no = append(no, fmt.Sprintf("host port %d in container %q", p.HostPort, c.Name))
			}
		}
		if sc := c.SecurityContext; sc != nil {
			if ptr := sc.Privileged; ptr != nil && *ptr {
				no = append(no, fmt.Sprintf("privileged container %q", c.Name))
			}
			if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
				no = append(no, fmt.Sprintf("added capabilities in container %q", c.Name))
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
				no = append(no, fmt.Sprintf("resourceFieldRef in variable %s", e.Name))
			}
		}
	}
	if len(no) == 0 {
		return nil
	}
	return fmt.Errorf("bex-node does not run %s", strings.Join(no, ", "))
}

// tenantOf is the tenant whose uid range the Pod's container runs in: the
// driver's tenant label, else the namespace.
func tenantOf(pod *corev1.Pod) string {
	if t := pod.Labels[kube.LabelTenant]; t != "" {
		return t
	}
	return pod.Namespace
}

// pullSecrets reads the Pod's image pull secrets; a missing one is left
// out, as the kubelet does.
func (w *podWorker) pullSecrets(ctx context.Context, pod *corev1.Pod) ([]*corev1.Secret, error) {
	var out []*corev1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := w.a.opts.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading image pull secret %s: %w", ref.Name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// containerSpec is the sandbox container of c: the image's root
// filesystem or app directory, the command and environment as Kubernetes
// composes them, and c's resource limits.
func (w *podWorker) containerSpec(ctx context.Context, pod *corev1.Pod, c corev1.Container, img *image) (sandbox.Spec, error) {
	cfg := img.config
	local := func(v string) string { return v }
	if !cfg.RootFS {
		// An app directory's config names the host's directory; the
		// container sees it at /app.
		local = func(v string) string { return sandbox.AppPaths(v, img.dir) }
	}
	entry, args := cfg.Entrypoint, cfg.Cmd
	if len(c.Command) > 0 {
		entry, args = c.Command, nil
	}
	if len(c.Args) > 0 {
		args = c.Args
	}
	argv := append(append([]string(nil), entry...), args...)
	for i := range argv {
		argv[i] = local(argv[i])
	}
	if len(argv) == 0 {
		return sandbox.Spec{}, fmt.Errorf("container %q has no command and its image %q names none", c.Name, c.Image)
	}
	imageEnv := cfg.Env
	if !cfg.RootFS && w.a.opts.PlatformBinDir != "" {
		imageEnv = withPlatformBin(imageEnv, w.a.opts.PlatformBinDir)
	}
	env, err := w.environment(ctx, pod, c, imageEnv, local)
	if err != nil {
		return sandbox.Spec{}, err
	}
	limits, err := limitsOf(c.Resources.Limits)
	if err != nil {
		return sandbox.Spec{}, err
	}
	hostname := pod.Spec.Hostname
	if hostname == "" {
		hostname = pod.Name
	}
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	binds, err := w.a.volumes.mount(pod, c)
	if err != nil {
		return sandbox.Spec{}, err
	}
	spec := sandbox.Spec{Tenant: tenantOf(pod), Hostname: hostname, Args: argv, Env: env, Limits: limits, Binds: binds}
	if c.TTY {
		spec.Terminal, spec.TerminalSize = true, sandbox.TerminalSize{Cols: defaultCols, Rows: defaultRows}
	}
	workDir := c.WorkingDir
	if workDir == "" {
		workDir = local(cfg.WorkingDir)
	}
	if cfg.RootFS {
		spec.RootFS, spec.WorkDir = img.dir, workDir
	} else {
		spec.AppDir, spec.WorkDir = img.dir, workDir
	}
	return spec, nil
}

// defaultPath is the PATH of a container on the run base whose image sets
// none (the builder's images set one).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// withPlatformBin is env with dir at the end of its PATH, as the process
// runtime sets it (builder/release's imageEnv): what the stacks' processes
// name bare (bex-static) is found there. The Pod's own env may still set
// PATH.
func withPlatformBin(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
			continue
		}
		out = append(out, kv)
	}
	if path == "" {
		path = defaultPath
	}
	return append(out, "PATH="+path+":"+dir)
}

var envName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// environment composes the container's environment as the kubelet does:
// the image's, HOSTNAME, envFrom's sources in order (a prefix each), then
// env, each later one winning.
func (w *podWorker) environment(ctx context.Context, pod *corev1.Pod, c corev1.Container, image []string, local func(string) string) ([]string, error) {
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range image {
		k, v, _ := strings.Cut(kv, "=")
		set(k, local(v))
	}
	set("HOSTNAME", pod.Name)
	for _, src := range c.EnvFrom {
		ref := sourceRef{secret: src.SecretRef != nil}
		switch {
		case src.SecretRef != nil:
			ref.name, ref.optional = src.SecretRef.Name, src.SecretRef.Optional
		case src.ConfigMapRef != nil:
			ref.name, ref.optional = src.ConfigMapRef.Name, src.ConfigMapRef.Optional
		default:
			continue
		}
		data, _, err := w.readSource(ctx, pod.Namespace, ref)
		if err != nil {
			return nil, fmt.Errorf("envFrom: %w", err)
		}
		for k, v := range data {
			if envName.MatchString(src.Prefix + k) {
				set(src.Prefix+k, v)
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, e.Value)
			continue
		}
		v, ok, err := w.valueFrom(ctx, pod, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env, nil
}

// sourceRef names a Secret or ConfigMap a variable reads.
type sourceRef struct {
	secret   bool
	name     string
	optional *bool
}

func (r sourceRef) String() string {
	if r.secret {
		return fmt.Sprintf("secret %q", r.name)
	}
	return fmt.Sprintf("config map %q", r.name)
}

// readSource returns the data of the Secret or ConfigMap r names; found is
// false when it is missing and optional.
func (w *podWorker) readSource(ctx context.Context, ns string, r sourceRef) (data map[string]string, found bool, err error) {
	core := w.a.opts.Client.CoreV1()
	if r.secret {
		var s *corev1.Secret
		if s, err = core.Secrets(ns).Get(ctx, r.name, metav1.GetOptions{}); err == nil {
			data = make(map[string]string, len(s.Data))
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
	} else {
		var cm *corev1.ConfigMap
		if cm, err = core.ConfigMaps(ns).Get(ctx, r.name, metav1.GetOptions{}); err == nil {
			data = cm.Data
		}
	}
	if apierrors.IsNotFound(err) && ptrTrue(r.optional) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", r, err)
	}
	return data, true, nil
}

// valueFrom resolves one variable's source; ok is false for an optional
// source that is missing.
func (w *podWorker) valueFrom(ctx context.Context, pod *corev1.Pod, src *corev1.EnvVarSource) (string, bool, error) {
	var ref sourceRef
	var key string
	switch {
	case src.SecretKeyRef != nil:
		ref, key = sourceRef{secret: true, name: src.SecretKeyRef.Name, optional: src.SecretKeyRef.Optional}, src.SecretKeyRef.Key
	case src.ConfigMapKeyRef != nil:
		ref, key = sourceRef{name: src.ConfigMapKeyRef.Name, optional: src.ConfigMapKeyRef.Optional}, src.ConfigMapKeyRef.Key
	case src.FieldRef != nil:
		switch src.FieldRef.FieldPath {
		case "metadata.name":
			return pod.Name, true, nil
		case "metadata.namespace":
			return pod.Namespace, true, nil
		case "metadata.uid":
			return string(pod.UID), true, nil
		case "spec.nodeName":
			return pod.Spec.NodeName, true, nil
		case "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, true, nil
		case "status.hostIP":
			return w.a.opts.Address.String(), true, nil
		}
		return "", false, fmt.Errorf("field %s is not one bex-node resolves", src.FieldRef.FieldPath)
	default:
		return "", false, errors.New("no source")
	}
	data, found, err := w.readSource(ctx, pod.Namespace, ref)
	if err != nil || !found {
		return "", false, err
	}
	v, ok := data[key]
	if !ok && !ptrTrue(ref.optional) {
		return "", false, fmt.Errorf("%s has no key %q", ref, key)
	}
	return v, ok, nil
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// limitsOf turns a container's resource limits (memory, CPU,
// ephemeral-storage) into the sandbox's (the sandbox's defaults where
// there is none).
func limitsOf(l corev1.ResourceList) (sandbox.Limits, error) {
	var out sandbox.Limits
	if q, ok := l[corev1.ResourceMemory]; ok {
		if q.Sign() <= 0 {
			return out, fmt.Errorf("invalid memory limit %s", q.String())
		}
		out.Memory = q.Value()
	}
	if q, ok := l[corev1.ResourceCPU]; ok {
		if q.Sign() <= 0 {
			return out, fmt.Errorf("invalid cpu limit %s", q.String())
		}
		out.CPUMilli = q.MilliValue()
	}
	// What a container may write is its /tmp, a tmpfs whose pages count
	// in its memory: ephemeral-storage sizes it.
	if q, ok := l[corev1.ResourceEphemeralStorage]; ok {
		if q.Sign() <= 0 {
			return out, fmt.Errorf("invalid ephemeral-storage limit %s", q.String())
		}
		out.Tmp = q.Value()
	}
	return out, nil
}
