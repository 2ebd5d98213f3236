package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

// Labels and names of a build's Pod and Secret.
const (
	// LabelBuildOf is the app a build Pod builds.
	LabelBuildOf = "bex.co/build-of"
	// buildComponent is the component label of build Pods, and their
	// container's name.
	buildComponent = "build"
	// BuildAgentPort is the port the build's agent serves on.
	BuildAgentPort = 8080
	// BuildTokenEnv is the variable the agent reads its token from
	// (builder/buildagent.TokenEnv).
	BuildTokenEnv = "BEX_BUILD_TOKEN"
	// BuildDir is the agent's work directory in the Pod: under /tmp, which
	// a container may write even with a read-only root.
	BuildDir = "/tmp/bex-build"
	// BuildAgentIdle is the agent's --idle-timeout: it exits when no call
	// of the builder's has been in flight for that long (the builder is
	// gone), long before the Pod's deadline. A healthy build leaves its
	// agent idle only for the builder's own work between two calls.
	BuildAgentIdle = 2 * time.Minute
)

// BuildSpec is a build's Pod.
type BuildSpec struct {
	Tenant, App string
	// Image is the builder image: the stacks' toolchains and
	// bex-build-agent on its PATH.
	Image string
	// Resources bound the Pod's container (the plan's CPU and memory).
	Resources runtime.Resources
	// Disk, a quantity, bounds what the build writes (the container's
	// ephemeral-storage: the checkout, HOME, TMPDIR, the caches); a
	// kubelet evicts the Pod past it. Empty: no bound.
	Disk string
	// Timeout is the Pod's activeDeadlineSeconds, the build's time limit.
	Timeout time.Duration
	// IdleTimeout is the agent's --idle-timeout; zero or less:
	// BuildAgentIdle.
	IdleTimeout time.Duration
}

// BuildPod is a build's Pod whose agent answers.
type BuildPod struct {
	// URL is the agent's, http://<pod IP>:BuildAgentPort.
	URL string
	// Token is the build's: the agent wants it on every call.
	Token string
	// Dir is the agent's work directory.
	Dir string
	r   *oneOff
}

// Delete deletes the Pod and its Secret, even when ctx has ended.
func (p *BuildPod) Delete(ctx context.Context) { p.r.cleanUp(ctx) }

// StartBuild makes a build's Pod in the tenant's namespace and returns
// once its agent is ready. The Pod runs as the app's Pods do (restricted
// Pod Security, no service-account token, no service links), with the
// build's resources, restartPolicy Never and spec.Timeout as its active
// deadline; its agent exits after spec.IdleTimeout without a call, so a Pod
// whose builder stopped ends long before that deadline; its token comes from a Secret of its own that the Pod owns.
// It serves the builder only: nothing selects it but its own labels. A
// Pod that will not start (its image cannot be pulled, it was refused) or
// is not ready after Options.RunStartTimeout is deleted, with an error
// saying why.
func (d *Driver) StartBuild(ctx context.Context, spec BuildSpec) (*BuildPod, error) {
	if spec.Image == "" {
		return nil, errors.New("the build has no builder image")
	}
	rel := runtime.Release{Tenant: spec.Tenant, App: spec.App, Resources: spec.Resources}
	ns := d.opts.Namespace(spec.Tenant)
	name := runPodName(spec.App, buildComponent)
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(tok)
	pod, err := d.buildPod(ns, name, spec)
	if err != nil {
		return nil, err
	}
	if d.opts.PreparedNamespaces {
		err = d.waitNamespace(ctx, ns, nil)
	} else {
		err = d.PrepareNamespace(ctx, spec.Tenant)
	}
	if err != nil {
		return nil, err
	}
	d.deleteEnded(ctx, ns, buildSelector(spec.App))
	r := &oneOff{d: d, ns: ns, name: name, rel: rel, data: map[string][]byte{BuildTokenEnv: []byte(token)}}
	if err := r.create(ctx, pod); err != nil {
		r.cleanUp(ctx)
		return nil, err
	}
	ip, err := r.waitReady(ctx)
	if err != nil {
		r.cleanUp(ctx)
		return nil, err
	}
	return &BuildPod{URL: "http://" + net.JoinHostPort(ip, strconv.Itoa(BuildAgentPort)), Token: token, Dir: BuildDir, r: r}, nil
}

// buildSelector selects the build Pods and Secrets of an app.
func buildSelector(app string) client.MatchingLabels {
	return client.MatchingLabels{LabelBuildOf: app, LabelManagedBy: managedBy}
}

// buildPod returns the Pod of a build.
func (d *Driver) buildPod(ns, name string, spec BuildSpec) (*corev1.Pod, error) {
	res, err := resources(spec.Resources)
	if err != nil {
		return nil, err
	}
	idle := spec.IdleTimeout
	if idle <= 0 {
		idle = BuildAgentIdle
	}
	container := corev1ac.Container().
		WithName(buildComponent).
		WithImage(spec.Image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand("bex-build-agent", "--listen", ":"+strconv.Itoa(BuildAgentPort), "--dir", BuildDir,
			"--idle-timeout", idle.String()).
		WithEnv(corev1ac.EnvVar().WithName(BuildTokenEnv).WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(name).WithKey(BuildTokenEnv)))).
		WithPorts(corev1ac.ContainerPort().WithName("agent").WithContainerPort(BuildAgentPort)).
		WithReadinessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromInt32(BuildAgentPort))).
			WithPeriodSeconds(1).WithFailureThreshold(1)).
		WithSecurityContext(confined())
	if spec.Disk != "" {
		q, err := resource.ParseQuantity(spec.Disk)
		if err != nil || q.Sign() <= 0 {
			return nil, fmt.Errorf("invalid build disk %q: want a quantity above zero, like 4Gi", spec.Disk)
		}
		if res == nil {
			res = corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{}).WithLimits(corev1.ResourceList{})
		}
		(*res.Requests)[corev1.ResourceEphemeralStorage] = q
		(*res.Limits)[corev1.ResourceEphemeralStorage] = q
	}
	if res != nil {
		container.WithResources(res)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = d.opts.MaxRunDuration
	}
	podSpec := d.podSpec(container).
		WithRestartPolicy(corev1.RestartPolicyNever).
		WithActiveDeadlineSeconds(int64(seconds(timeout)))
	labels := map[string]string{
		LabelName: spec.App, LabelManagedBy: managedBy, LabelTenant: spec.Tenant,
		LabelComponent: buildComponent, LabelBuildOf: spec.App,
	}
	return typedPod(corev1ac.Pod(name, ns).WithLabels(labels).WithSpec(podSpec))
}

// waitReady waits until the build's container is ready and the Pod has an
// address, and returns it; or says why it will not be.
func (r *oneOff) waitReady(ctx context.Context) (string, error) {
	pod, err := r.waitFor(ctx, "ready", "build pod", buildReadiness)
	if err != nil {
		return "", err
	}
	return pod.Status.PodIP, nil
}

// buildReadiness reports whether a build Pod's agent is ready, and why
// not: fatal when it will not be (its container cannot start, or ended).
func buildReadiness(pod *corev1.Pod) (bool, podWait) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != buildComponent {
			continue
		}
		if t := cs.State.Terminated; t != nil {
			return false, podWait{why: strings.TrimSpace(fmt.Sprintf("the agent exited with %d: %s %s", t.ExitCode, t.Reason, t.Message)), fatal: true}
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return false, podWait{why: strings.TrimSpace(w.Reason + ": " + w.Message), fatal: runStartReasons[w.Reason]}
		}
		if cs.Ready && pod.Status.PodIP != "" {
			return true, podWait{}
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false, podWait{why: strings.TrimSpace(fmt.Sprintf("%s %s: %s", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)), fatal: true}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return false, podWait{why: strings.TrimSpace(c.Reason + ": " + c.Message)}
		}
	}
	return false, podWait{}
}
