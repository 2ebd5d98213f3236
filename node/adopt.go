package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/sandbox"
)

// An agent that stops leaves its Pods' containers running, as a kubelet
// does, and the next agent of the same node and StateDir adopts those
// whose Pod is still bound to the node with the same UID and container
// spec. Each running container has a record under
// StateDir/containers/<pod UID>.json: what the sandbox's own record of the
// container (its address, network, mounts) and runc's state do not say of
// it. A record of another version, or one that does not read, is not
// adopted: its container is removed and the Pod runs anew.
const keptVersion = 1

// kept is the record of a Pod's container that the next agent adopts.
type kept struct {
	Version   int       `json:"version"`
	PodUID    types.UID `json:"podUID"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Container string    `json:"container"`
	// SpecHash is the container's spec as it ran (specHash): a Pod whose
	// container changed runs it anew.
	SpecHash  string `json:"specHash"`
	SandboxID string `json:"sandboxID"`
	// The image it was made from, in use while it runs.
	Tenant      string            `json:"tenant"`
	ImageRef    string            `json:"imageRef"`
	ImageDir    string            `json:"imageDir"`
	ImageConfig build.ImageConfig `json:"imageConfig"`
	ImageID     string            `json:"imageID"`
	// Its status: the run's start, restarts and readiness; when the
	// Pod started on the node and when the worker took it (its deadline's
	// start).
	Restarts  int32                            `json:"restarts"`
	StartedAt metav1.Time                      `json:"startedAt"`
	StartTime metav1.Time                      `json:"startTime"`
	Took      time.Time                        `json:"took"`
	Ready     bool                             `json:"ready"`
	Last      *corev1.ContainerStateTerminated `json:"last,omitempty"`

	// Set when the agent starts: the sandbox's container and the image.
	container *sandbox.Container
	image     *image
}

// specHash identifies a container's spec: a Pod whose container's spec
// hashes otherwise runs it anew, as the kubelet restarts a container whose
// hash changed.
func specHash(c corev1.Container) string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func (a *Agent) keptPath(uid types.UID) string {
	return filepath.Join(a.opts.StateDir, "containers", string(uid)+".json")
}

// writeKept writes the record of the worker's running container,
// atomically.
func (w *podWorker) writeKept(pod *corev1.Pod, c corev1.Container, container *sandbox.Container) {
	st := w.snapshot()
	if st.running == nil || w.image == nil {
		return
	}
	k := kept{Version: keptVersion, PodUID: pod.UID, Namespace: pod.Namespace, Name: pod.Name,
		Container: c.Name, SpecHash: specHash(c), SandboxID: container.ID(),
		Tenant: w.image.tenant, ImageRef: w.image.ref, ImageDir: w.image.dir, ImageConfig: w.image.config, ImageID: st.imageID,
		Restarts: st.restarts, StartedAt: st.running.StartedAt, Took: w.took, Ready: st.ready, Last: st.last}
	if st.startTime != nil {
		k.StartTime = *st.startTime
	}
	b, err := json.Marshal(k)
	if err == nil {
		path := w.a.keptPath(pod.UID)
		if err = os.WriteFile(path+".new", b, 0o600); err == nil {
			err = os.Rename(path+".new", path)
		}
	}
	if err != nil {
		w.a.opts.Log.Error(err, "Recording a running container", "pod", klog.KObj(pod))
	}
}

func (a *Agent) removeKept(uid types.UID) {
	if err := os.Remove(a.keptPath(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.opts.Log.Error(err, "Removing the record of a container", "podUID", uid)
	}
}

// loadKept reads the records of the containers an earlier agent left and
// matches them with the sandbox's kept containers; it removes the
// containers and records that do not match, saying why, and returns the
// others by Pod UID, their images in use.
func (a *Agent) loadKept() (map[types.UID]*kept, error) {
	log := a.opts.Log.WithValues("node", a.opts.NodeName)
	dir := filepath.Join(a.opts.StateDir, "containers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	containers := map[string]*sandbox.Container{}
	for _, c := range a.opts.Sandbox.Kept() {
		containers[c.ID()] = c
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[types.UID]*kept{}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		k, err := readKept(path)
		if err == nil && k.PodUID+".json" != types.UID(e.Name()) {
			err = fmt.Errorf("%s records pod %s", path, k.PodUID)
		}
		if err == nil && containers[k.SandboxID] == nil {
			err = fmt.Errorf("the sandbox kept no container %s", k.SandboxID)
		}
		if err != nil {
			log.Info("Not adopting a container an earlier agent left; its pod runs anew", "record", e.Name(), "reason", err.Error())
			os.Remove(path)
			continue
		}
		k.container = containers[k.SandboxID]
		delete(containers, k.SandboxID)
		k.image = a.images.adopt(k.Tenant, k.ImageRef, k.ImageDir, k.ImageConfig)
		out[k.PodUID] = k
	}
	for _, c := range containers {
		log.Info("Removing a container an earlier agent left without a record", "container", c.ID())
		if err := c.Destroy(); err != nil {
			log.Error(err, "Removing a container an earlier agent left")
		}
	}
	return out, nil
}

// readKept reads a record of keptVersion.
func readKept(path string) (*kept, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var k kept
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	if k.Version != keptVersion {
		return nil, fmt.Errorf("%s is a record of version %d, not %d", filepath.Base(path), k.Version, keptVersion)
	}
	if k.PodUID == "" || k.SandboxID == "" || k.ImageDir == "" || k.Container == "" {
		return nil, fmt.Errorf("%s is incomplete", filepath.Base(path))
	}
	return &k, nil
}

// takeKept hands the kept container of the Pod to its worker, once.
// Under a.mu.
func (a *Agent) takeKept(uid types.UID) *kept {
	k := a.kept[uid]
	delete(a.kept, uid)
	return k
}

// sweepKept removes the kept containers no worker took once the agent
// has seen every Pod bound to the node: their Pods were deleted, or
// finished, while no agent ran. exists says whether a Pod of the UID is
// still there (its logs stay then).
func (a *Agent) sweepKept(exists func(types.UID) bool) {
	a.mu.Lock()
	left := a.kept
	a.kept = map[types.UID]*kept{}
	a.mu.Unlock()
	for uid, k := range left {
		log := a.opts.Log.WithValues("pod", klog.KRef(k.Namespace, k.Name), "podUID", uid)
		log.Info("Stopping a container whose pod is no longer bound to the node")
		a.dropKept(log, k)
		if !exists(uid) {
			a.removeLogs(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, UID: uid}})
		}
	}
}

// dropKept removes a kept container, its volumes and record and ends its
// image's use.
func (a *Agent) dropKept(log logr.Logger, k *kept) {
	if err := k.container.Destroy(); err != nil {
		log.Error(err, "Removing a container")
	}
	a.images.release(k.image)
	if err := a.volumes.remove(string(k.PodUID)); err != nil {
		log.Error(err, "Removing the pod's volumes")
	}
	a.removeKept(k.PodUID)
}

// adopt takes over the container an earlier agent left running for the
// Pod. It returns the container and its process, still running, or the
// container and the exit code of a process that ended meanwhile (state
// says so), or nothing when the container is not the Pod's any more (it
// is removed; the Pod runs anew). Either of the last two counts a
// restart, as the kubelet counts one for a container that is not running
// any more.
func (w *podWorker) adopt(ctx context.Context, pod *corev1.Pod, c corev1.Container, k *kept) (*sandbox.Container, *sandbox.Process, *int32) {
	log := w.a.opts.Log.WithValues("pod", klog.KObj(pod))
	w.setState(func(s *podState) {
		s.restarts, s.last = k.Restarts, k.Last
		s.startTime = &k.StartTime
	})
	w.took = k.Took
	var why string
	var proc *sandbox.Process
	switch {
	case k.Container != c.Name || k.SpecHash != specHash(c):
		why = "the pod's container changed"
	case c.Stdin || c.TTY:
		why = "a container with stdin or a terminal is not adopted"
	default:
		var err error
		if proc, err = k.container.Resume(); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		log.Info("Not adopting the pod's container; it runs anew", "reason", why)
		w.a.dropKept(log, k)
		w.setState(func(s *podState) { s.restarts++ })
		return nil, nil, nil
	}
	w.image = k.image
	w.setState(func(s *podState) {
		s.podIP, s.sandboxReady = k.container.Addr().String(), true
		s.imageID, s.containerID = k.ImageID, "runc://"+k.container.ID()
	})
	select {
	case <-proc.Done():
		code := exitCode(proc.Wait())
		log.Info("The pod's container ended while no agent ran", "exitCode", code)
		w.setState(func(s *podState) {
			s.phase = corev1.PodRunning
			s.waiting = nil
			s.terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error",
				StartedAt: k.StartedAt, FinishedAt: metav1.Now(), ContainerID: s.containerID}
			if code == 0 {
				s.terminated.Reason = "Completed"
			}
		})
		return k.container, nil, &code
	default:
	}
	log.Info("Adopted the pod's running container", "container", k.container.ID(), "restarts", k.Restarts)
	w.setState(func(s *podState) {
		s.phase = corev1.PodRunning
		s.waiting, s.running = nil, &corev1.ContainerStateRunning{StartedAt: k.StartedAt}
		s.started, s.ready = true, k.Ready
	})
	return k.container, proc, nil
}

// exitCode is a Process's exit status as the Pod reports it: 128 when
// nothing recorded it.
func exitCode(code int) int32 {
	if code < 0 {
		return 128
	}
	return int32(code)
}

// Reset removes what the agents of stateDir left on the machine, as
// "kubeadm reset" cleans a node that leaves its cluster: the containers
// they left running (killed at once: the node is drained first, or its
// Pods are gone), their emptyDir volumes, records, logs and images. sb is
// a Manager of the agents' sandbox Owner, which the caller Closes after;
// no agent of stateDir may run.
func Reset(sb *sandbox.Manager, stateDir string) error {
	var errs []error
	for _, c := range sb.Kept() {
		errs = append(errs, c.Destroy())
	}
	volumes := &volumeStore{dir: filepath.Join(stateDir, "volumes")}
	errs = append(errs, volumes.sweep(nil))
	for _, d := range []string{"containers", "images", "pods", "volumes"} {
		errs = append(errs, os.RemoveAll(filepath.Join(stateDir, d)))
	}
	return errors.Join(errs...)
}
