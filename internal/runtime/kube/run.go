package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

var _ runtime.Runner = (*Driver)(nil)

// Labels of a one-off run's Pod and Secret. They carry no LabelApp and no
// LabelProcess: nothing that selects the app's instances (its Service, its
// Deployments, Status and Logs) selects a run.
const (
	// LabelRunOf is the app a run belongs to.
	LabelRunOf = "bex.co/run-of"
	// LabelRun is the run's Pod's name.
	LabelRun = "bex.co/run"
	// LabelRunInstance is the instance a run's lines are of in its app's
	// log ("run.3"), on the Pod of a run whose output goes there
	// (runtime.Streams.Log): Logs reads such Pods, and they are kept
	// Options.RunLogRetention once their command has ended.
	LabelRunInstance = "bex.co/run-instance"
	// LabelRunID is the ID its caller records a run under
	// (runtime.Streams.RunID), on the Pod of a run that has one: EndRun
	// finds the Pod by it.
	LabelRunID = "bex.co/run-id"
)

// runContainer is the name of a run Pod's container.
const runContainer = "run"

// runStartReasons are the reasons a run's container waits with that end
// the run at once: it will not start without a change. Not
// CreateContainerConfigError: the node may not read the run's Secret yet
// (the Node authorizer learns of a Pod's Secrets a moment after the Pod is
// bound), and the kubelet tries again.
var runStartReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerError": true, "RunContainerError": true,
}

// runSelector selects the runs of an app.
func runSelector(app string) client.MatchingLabels {
	return client.MatchingLabels{LabelRunOf: app, LabelManagedBy: managedBy}
}

// Run implements runtime.Runner with a Pod of its own in the app's
// namespace: the release's image, resources and security context as its
// Deployments' pods have them, its environment from a Secret of the run's
// own (owned by the Pod), no port, restartPolicy Never and an
// activeDeadlineSeconds from ctx's deadline (Options.MaxRunDuration
// without one). cmd.Attach is called before the Pod is made. The
// container's output comes through the apiserver (pods/log, followed),
// stdout and stderr merged into Streams.Stdout; but a cmd with Stdin or
// Terminal has its container made with stdin, stdinOnce and tty
// (Terminal) and attaches to it (pods/attach, attach): input, output
// apart (one stream on a terminal) and the terminal's sizes. The exit
// status is the container's terminated state's. A container that cannot start (its
// image cannot be pulled, its Pod refused) or a Pod not started after
// Options.RunStartTimeout (unschedulable) ends the run with an error
// saying why. When ctx ends the Pod is deleted with Options.RunGracePeriod
// (the Pod of a run whose Streams.Log is set, a detached run, is stopped
// by its activeDeadlineSeconds lowered to 1 and kept) and Exit.Reason is
// context.Cause(ctx). The Pod and its Secret are deleted before Run
// returns, but for the Pod of a detached run whose command ended, on its
// own or stopped: labelled LabelRunInstance, its log is the run's lines
// in Logs, and it is kept Options.RunLogRetention. Run Pods that ended without their Run (the
// platform stopped) are deleted by SweepRuns, the app's next run and
// Remove; the Pod of a run whose Streams.RunID is set is labelled
// LabelRunID with it, so that EndRun stops it once its Run is gone.
func (d *Driver) Run(ctx context.Context, rel runtime.Release, cmd runtime.Command) (runtime.Exit, error) {
	if err := rel.Validate(); err != nil {
		return runtime.Exit{}, err
	}
	if rel.Image == "" {
		return runtime.Exit{}, errors.New("release has no image")
	}
	if len(cmd.Args) == 0 || cmd.Args[0] == "" {
		return runtime.Exit{}, errors.New("no command to run")
	}
	if cmd.Attach == nil {
		return runtime.Exit{}, errors.New("the command has no streams to attach")
	}
	ns := d.opts.Namespace(rel.Tenant)
	name := runPodName(rel.App, cmd.Name)
	pod, err := d.runPod(ctx, ns, name, rel, cmd)
	if err != nil {
		return runtime.Exit{}, err
	}
	if d.opts.PreparedNamespaces {
		err = d.waitNamespace(ctx, ns, nil)
	} else {
		err = d.PrepareNamespace(ctx, rel.Tenant)
	}
	if err != nil {
		return runtime.Exit{}, err
	}
	d.deleteEnded(ctx, ns, runSelector(rel.App))

	streams, err := cmd.Attach(rel.Number)
	if err != nil {
		return runtime.Exit{}, err
	}
	stdout, stderr := streams.Stdout, streams.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	r := &oneOff{d: d, ns: ns, name: name, rel: rel}
	if l := streams.Log; l != nil {
		r.logged = true
		pod.Labels[LabelRunInstance] = l.Process + "." + strconv.Itoa(l.Index)
	}
	if id := streams.RunID; id != "" {
		if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
			return runtime.Exit{}, fmt.Errorf("run ID %q: %s", id, strings.Join(errs, "; "))
		}
		pod.Labels[LabelRunID] = id
	}
	defer r.cleanUp(ctx)
	if err := r.create(ctx, pod); err != nil {
		return runtime.Exit{}, err
	}
	if err := r.waitStart(ctx); err != nil {
		if ctx.Err() != nil {
			return r.stop(ctx), nil
		}
		return runtime.Exit{}, err
	}
	if interactive(cmd) {
		r.attach(ctx, cmd, streams)
	} else {
		r.copyOutput(ctx, stdout, stderr)
	}
	if ctx.Err() != nil {
		return r.stop(ctx), nil
	}
	return r.waitExit(ctx)
}

// runPodName is the name of a new run's Pod: "<app>-<name>-<random>",
// name made a DNS label ("run.3" is "run-3"), all at most 63 characters.
func runPodName(app, name string) string {
	name = strings.Trim(invalidInName.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if name == "" {
		name = "run"
	}
	base := app + "-" + name
	if len(base) > 57 {
		base = strings.TrimRight(base[:57], "-")
	}
	return base + "-" + utilrand.String(5)
}

var invalidInName = regexp.MustCompile(`[^a-z0-9]+`)

// runPod returns the Pod of a run of cmd in rel, named name, and checks
// what the release asks of it.
func (d *Driver) runPod(ctx context.Context, ns, name string, rel runtime.Release, cmd runtime.Command) (*corev1.Pod, error) {
	container, err := appContainer(rel, runContainer, name)
	if err != nil {
		return nil, err
	}
	container.WithCommand(cmd.Args...)
	if interactive(cmd) {
		container.WithStdin(true).WithStdinOnce(true).WithTTY(cmd.Terminal)
	}
	deadline := d.opts.MaxRunDuration
	if t, ok := ctx.Deadline(); ok {
		deadline = min(deadline, time.Until(t))
	}
	// A minute over: the deadline is for a Pod whose Run is gone; Run
	// itself ends the Pod, and says why, at ctx's end.
	// Its grace period is RunGracePeriod however it stops: deleted, or
	// past its deadline (lowered to stop a logged run).
	spec := d.podSpec(container).
		WithRestartPolicy(corev1.RestartPolicyNever).
		WithActiveDeadlineSeconds(int64(seconds(deadline + time.Minute))).
		WithTerminationGracePeriodSeconds(int64(seconds(d.opts.RunGracePeriod)))
	return typedPod(corev1ac.Pod(name, ns).WithLabels(runLabels(rel, name)).WithSpec(spec))
}

// typedPod is the Pod ac describes, to create it (an apply would take over
// a Pod of the same name).
func typedPod(ac *corev1ac.PodApplyConfiguration) (*corev1.Pod, error) {
	b, err := json.Marshal(ac)
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := json.Unmarshal(b, &pod); err != nil {
		return nil, err
	}
	return &pod, nil
}

// runLabels are the labels of a run's Pod and Secret.
func runLabels(rel runtime.Release, name string) map[string]string {
	l := appLabels(rel)
	delete(l, LabelApp)
	l[LabelComponent] = runContainer
	l[LabelRunOf] = rel.App
	l[LabelRun] = name
	return l
}

// deleteEnded deletes the Pods of sel (an app's runs or builds) that are
// kept no longer (pastKeeping). Their Secrets go with them (they own
// them). Errors are left for SweepRuns and Remove to meet.
func (d *Driver) deleteEnded(ctx context.Context, ns string, sel client.MatchingLabels) {
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(ns), sel); err != nil {
		return
	}
	now := time.Now()
	for i := range pods.Items {
		if p := &pods.Items[i]; d.pastKeeping(p, now) {
			_ = d.c.Delete(ctx, p, client.GracePeriodSeconds(int64(d.opts.RunGracePeriod.Seconds())))
		}
	}
}

// pastKeeping reports whether a run's or build's Pod is kept no longer
// at now: it ended over a minute ago (Options.RunLogRetention ago for a
// logged run's, whose lines Logs reads), or it passed its active deadline
// and grace period without the call that made it ending it (the platform
// stopped meanwhile; a kubelet that keeps no deadline leaves it running).
func (d *Driver) pastKeeping(p *corev1.Pod, now time.Time) bool {
	switch s := p.Spec.ActiveDeadlineSeconds; {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		// A logged run stopped by its deadline is kept as one that
		// ended on its own.
		since := p.CreationTimestamp.Time
		if t := terminated(p); t != nil {
			since = t.FinishedAt.Time
		}
		keep := time.Minute
		if p.Labels[LabelRunInstance] != "" {
			keep = d.opts.RunLogRetention
		}
		return now.Sub(since) > keep
	case s != nil:
		grace := time.Duration(ptr.Deref(p.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
		return now.Sub(p.CreationTimestamp.Time) > time.Duration(*s)*time.Second+grace
	}
	return false
}

// oneOff is a run's Pod.
type oneOff struct {
	d        *Driver
	ns, name string
	rel      runtime.Release
	// data is the Secret's data: rel's environment unless set.
	data map[string][]byte
	// secret says the run's Secret was made; uid is its Pod's.
	secret bool
	uid    types.UID
	// logged says the run's output goes to its app's log: a Pod whose
	// command ended on its own is kept for it.
	logged bool
	// seen is the last state of the container Run read.
	seen *corev1.ContainerStateTerminated
}

func (r *oneOff) key() client.ObjectKey { return client.ObjectKey{Namespace: r.ns, Name: r.name} }

// create makes the run's Secret, then its Pod, then makes the Pod the
// Secret's owner: the garbage collector deletes a Secret whose Run ended
// without deleting it.
func (r *oneOff) create(ctx context.Context, pod *corev1.Pod) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns, Labels: pod.Labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       r.data,
	}
	if secret.Data == nil {
		secret.Data = envData(r.rel)
	}
	if err := r.d.c.Create(ctx, secret); err != nil {
		return fmt.Errorf("creating secret %s/%s: %w", r.ns, r.name, err)
	}
	r.secret = true
	// A namespace made a moment ago (a first release's release phase) may
	// have no default ServiceAccount yet, and admission refuses Pods until
	// the controller manager makes it.
	until := time.Now().Add(r.d.opts.RunStartTimeout)
	for {
		err := r.d.c.Create(ctx, pod)
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "service account") || time.Now().After(until) || r.d.sleep(ctx) != nil {
			return fmt.Errorf("creating pod %s/%s: %w", r.ns, r.name, err)
		}
	}
	r.uid = pod.UID
	patch := client.MergeFrom(secret.DeepCopy())
	secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	if err := r.d.c.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("giving secret %s/%s its owner: %w", r.ns, r.name, err)
	}
	return nil
}

// get reads the run's Pod (fetch) and keeps its container's end in seen.
func (r *oneOff) get(ctx context.Context) (*corev1.Pod, error) {
	pod, err := r.fetch(ctx)
	if pod != nil {
		if t := terminated(pod); t != nil {
			r.seen = t
		}
	}
	return pod, err
}

// fetch reads the run's Pod; nil when it is gone (or replaced). Unlike
// get, it changes nothing of r: the copies of both output streams call it
// at once.
func (r *oneOff) fetch(ctx context.Context) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := r.d.c.Get(ctx, r.key(), &pod)
	if apierrors.IsNotFound(err) || err == nil && pod.UID != r.uid {
		return nil, nil
	}
	if err != nil {
		if throttledPastDeadline(err) {
			// The deadline passes before the client may ask again: wait
			// for it, so that callers see ctx ended, not a fault.
			<-ctx.Done()
		}
		return nil, fmt.Errorf("reading pod %s/%s: %w", r.ns, r.name, err)
	}
	return &pod, nil
}

// terminated is the terminated state of the Pod's container, nil while it
// has none.
func terminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == runContainer {
			return cs.State.Terminated
		}
	}
	return nil
}

// waitStart waits until the container runs or has run, and returns why
// not when it will not.
func (r *oneOff) waitStart(ctx context.Context) error {
	_, err := r.waitFor(ctx, "started", "pod", startOf)
	return err
}

// waitFor waits, at most Options.RunStartTimeout, until check says the Pod
// is as wanted (state: "started", "ready") and returns it; or returns why
// it will not be (check says so, the Pod went) or is not yet (the time
// ran out), naming it as what ("pod", "build pod").
func (r *oneOff) waitFor(ctx context.Context, state, what string, check func(*corev1.Pod) (bool, podWait)) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.d.opts.RunStartTimeout,
		fmt.Errorf("not %s after %s", state, r.d.opts.RunStartTimeout))
	defer cancel()
	why := "pending"
	for {
		pod, err := r.get(ctx)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if pod == nil && err == nil {
			return nil, fmt.Errorf("%s %s/%s was deleted before it was %s", what, r.ns, r.name, state)
		}
		if pod != nil {
			ok, w := check(pod)
			if ok {
				return pod, nil
			}
			if w.fatal {
				return nil, fmt.Errorf("%s %s/%s did not start: %s", what, r.ns, r.name, w.why)
			}
			if w.why != "" {
				why = w.why
			}
		}
		if r.d.sleep(ctx) != nil {
			// Run tells its own context's end from this bound.
			return nil, fmt.Errorf("%s %s/%s %v: %s", what, r.ns, r.name, context.Cause(ctx), why)
		}
	}
}

// podWait is why a Pod's container has not started; fatal when it will
// not.
type podWait struct {
	why   string
	fatal bool
}

// startOf reports whether the Pod's container runs or has run, and why
// not.
func startOf(pod *corev1.Pod) (bool, podWait) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != runContainer {
			continue
		}
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true, podWait{}
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return false, podWait{why: strings.TrimSpace(w.Reason + ": " + w.Message), fatal: runStartReasons[w.Reason]}
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

// sleep waits for the poll interval; its error is ctx's when ctx ends
// first.
func (d *Driver) sleep(ctx context.Context) error {
	t := time.NewTimer(d.opts.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// copyOutput copies the container's log until the container has ended
// or ctx ends: its stdout to stdout and its stderr to stderr where the
// cluster serves them apart (streams.go) and stderr is not nil, else both
// to stdout, as the log merges them.
func (r *oneOff) copyOutput(ctx context.Context, stdout, stderr io.Writer) {
	if stderr != nil && r.d.splitStreams() {
		rc, err := r.openOutput(ctx, corev1.LogStreamStderr)
		if err == nil {
			var wg sync.WaitGroup
			wg.Go(func() { r.copyStream(ctx, stderr, corev1.LogStreamStderr, rc) })
			r.copyStream(ctx, stdout, corev1.LogStreamStdout, nil)
			wg.Wait()
			return
		}
		r.d.refusedStream(err)
	}
	r.copyStream(ctx, stdout, corev1.LogStreamAll, nil)
}

func (r *oneOff) openOutput(ctx context.Context, stream string) (io.ReadCloser, error) {
	return r.d.followLog(ctx, r.ns, r.name, runContainer, stream, false, time.Time{})
}

// copyStream copies one stream of the container's log to out (rc, when
// not nil, opened already) until the container has ended or ctx ends. A
// stream that ends while the container still runs (the apiserver's
// connection dropped) is opened again and what came before is skipped. A
// log that cannot be read is said in out, once.
func (r *oneOff) copyStream(ctx context.Context, out io.Writer, stream string, rc io.ReadCloser) {
	var copied int64
	said := false
	for ctx.Err() == nil {
		var err error
		if rc == nil {
			rc, err = r.openOutput(ctx, stream)
		}
		switch {
		case err == nil:
			copied = copySkipping(out, rc, copied)
			rc.Close()
			rc = nil
		case !said && ctx.Err() == nil:
			fmt.Fprintf(out, "bex: reading the output of pod %s/%s: %v\n", r.ns, r.name, err)
			said = true
		}
		if r.ended(ctx) {
			return
		}
		if r.d.sleep(ctx) != nil {
			return
		}
	}
}

// ended reports whether the run's container has ended, or its Pod is
// gone; false when it cannot tell.
func (r *oneOff) ended(ctx context.Context) bool {
	pod, err := r.fetch(ctx)
	return err == nil && (pod == nil || terminated(pod) != nil)
}

// copySkipping copies from r to w after its first skip bytes, w's errors
// ignored (a client gone ends the run through its context), and returns
// how far it read.
func copySkipping(w io.Writer, r io.Reader, skip int64) int64 {
	var read int64
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		p := buf[:n]
		if read < skip {
			p = p[min(int64(n), skip-read):]
		}
		read += int64(n)
		if len(p) > 0 {
			_, _ = w.Write(p)
		}
		if err != nil {
			return read
		}
	}
}

// waitExit waits for the container's terminated state and returns the
// command's exit from it.
func (r *oneOff) waitExit(ctx context.Context) (runtime.Exit, error) {
	for r.seen == nil {
		pod, err := r.get(ctx)
		if err != nil && ctx.Err() != nil {
			return r.stop(ctx), nil
		}
		if err != nil {
			return runtime.Exit{}, err
		}
		if pod == nil {
			return runtime.Exit{}, fmt.Errorf("pod %s/%s was deleted while its command ran", r.ns, r.name)
		}
		if r.seen != nil {
			break
		}
		if err := r.d.sleep(ctx); err != nil {
			return r.stop(ctx), nil
		}
	}
	return r.exit(), nil
}

// exit is the command's exit from the container's terminated state.
func (r *oneOff) exit() runtime.Exit {
	t := r.seen
	exit := runtime.Exit{Code: exitCode(t)}
	if t.Reason == "OOMKilled" {
		exit.Reason = fmt.Sprintf("killed for going past its memory limit (%s)", r.rel.Resources.Memory)
	}
	return exit
}

// exitCode is the command's exit status from its container's terminated
// state: 128+N when signal N ended it.
func exitCode(t *corev1.ContainerStateTerminated) int {
	if t.ExitCode == 0 && t.Signal != 0 {
		return 128 + int(t.Signal)
	}
	return int(t.ExitCode)
}

// stop ends the run whose ctx ended: a logged run's Pod is stopped and
// kept (end), another's removed. The exit is its container's when the Pod
// said it, else that of a command ended by SIGTERM.
func (r *oneOff) stop(ctx context.Context) runtime.Exit {
	cause := context.Cause(ctx).Error()
	if r.logged {
		r.end(ctx)
	} else {
		r.remove(ctx)
	}
	exit := runtime.Exit{Code: 128 + 15}
	if r.seen != nil {
		exit = r.exit()
	}
	exit.Reason = cause
	return exit
}

// end stops a logged run's container and keeps its Pod, and so its lines
// and how it ended, for Logs: it lowers the Pod's activeDeadlineSeconds to
// 1 (the API lets it be lowered on a running Pod, never raised), so that
// the kubelet stops the container with the Pod's grace period
// (RunGracePeriod) and fails the Pod DeadlineExceeded, and waits for the
// container's end, at most 30 s past the grace period, even when ctx has
// ended. A Pod that does not end so (a kubelet that keeps no deadline) is
// deleted.
func (r *oneOff) end(ctx context.Context) {
	if r.uid == "" {
		return
	}
	wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.d.opts.RunGracePeriod+30*time.Second)
	defer cancel()
	if err := r.lowerDeadline(wait); err == nil {
		for r.seen == nil {
			p, err := r.get(wait)
			if p == nil && err == nil || r.seen != nil || p != nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) {
				break
			}
			if r.d.sleep(wait) != nil {
				break
			}
		}
	}
	if r.seen == nil {
		r.remove(ctx)
	}
}

// lowerDeadline lowers the run's Pod's activeDeadlineSeconds to 1, so
// that its kubelet stops the container with the Pod's grace period and
// fails the Pod DeadlineExceeded.
func (r *oneOff) lowerDeadline(ctx context.Context) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.name}}
	// The UID makes the patch fail on another Pod of the name.
	patch := fmt.Sprintf(`{"metadata":{"uid":%q},"spec":{"activeDeadlineSeconds":1}}`, r.uid)
	return r.d.c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// deletePod deletes the run's Pod with RunGracePeriod; one of another UID
// is left alone.
func (r *oneOff) deletePod(ctx context.Context) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.name}}
	return r.d.c.Delete(ctx, pod, client.GracePeriodSeconds(int64(r.d.opts.RunGracePeriod.Seconds())), client.Preconditions{UID: &r.uid})
}

// remove deletes the run's Pod with RunGracePeriod, even when ctx has
// ended, and waits until it is gone, at most 30 s past the grace period.
func (r *oneOff) remove(ctx context.Context) {
	if r.uid == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.d.opts.RunGracePeriod+30*time.Second)
	defer cancel()
	_ = r.deletePod(ctx)
	for {
		p, err := r.get(ctx)
		if p == nil && err == nil || r.d.sleep(ctx) != nil {
			return
		}
	}
}

// cleanUp removes the run's Pod, but for a logged run's whose command
// ended on its own, and deletes its Secret, even when ctx has ended.
func (r *oneOff) cleanUp(ctx context.Context) {
	if !r.logged || r.seen == nil {
		r.remove(ctx)
	}
	if r.secret {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.name}}
		_ = r.d.deleteIgnoringNotFound(ctx, secret)
	}
}
