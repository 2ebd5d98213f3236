package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"bex.co/bex/node"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

// seen is what a test reads of a running Pod to tell it later.
type seen struct {
	uid, ip, started, containerID string
	startedAt, readySince         metav1.Time
	restarts                      int32
}

// waitRunning waits until the Pod is Ready with restarts restarts (any
// when negative) and returns what tells its container's process.
func (f *fixture) waitRunning(t *testing.T, ns, name string, restarts int32) seen {
	t.Helper()
	var s seen
	platformtest.Eventually(t, 90*time.Second, "pod "+name+" is ready", func(ctx context.Context) error {
		p, err := f.getPod(ctx, ns, name)
		if err != nil {
			return err
		}
		cs := p.Status.ContainerStatuses
		if !podReady(p) || p.Status.PodIP == "" || len(cs) != 1 || cs[0].State.Running == nil || (restarts >= 0 && cs[0].RestartCount != restarts) {
			return fmt.Errorf("phase %s, ip %q, conditions %v, containers %+v", p.Status.Phase, p.Status.PodIP, p.Status.Conditions, cs)
		}
		code, body, err := nodetest.Get(ctx, "http://"+p.Status.PodIP+":8080/started")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /started: %d %v", code, err)
		}
		s = seen{uid: string(p.UID), ip: p.Status.PodIP, started: strings.TrimSpace(body), containerID: cs[0].ContainerID,
			startedAt: cs[0].State.Running.StartedAt, restarts: cs[0].RestartCount}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				s.readySince = c.LastTransitionTime
			}
		}
		return nil
	})
	return s
}

// TestAgentAdoptsContainersAcrossARestart restarts the agent as a
// kubelet restarts (an upgrade, a crash, make run's restart): the
// containers keep running meanwhile, and the new agent adopts those of
// Pods still bound to the node, with their status, log, volumes and
// probes, stops those of Pods deleted meanwhile, and counts a restart of
// one that exited meanwhile.
func TestAgentAdoptsContainersAcrossARestart(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	const ns = "tenant-a"
	f.Namespace(t, ns)
	pull := f.PullSecret(t, ns)
	if _, err := f.Admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "env"}, StringData: map[string]string{"VERSION": "from-secret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const sleep = 4 // web-1's preStop sleep
	web := f.webPod(ns, "web-1", pull)
	web.Spec.TerminationGracePeriodSeconds = ptr.To(int64(sleep + 10))
	web.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	web.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	web.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: sleep}}}
	names := []string{"web-1", "exits-1", "deleted-1", "forced-1"}
	for _, p := range []*corev1.Pod{web, f.webPod(ns, "exits-1", pull), f.webPod(ns, "deleted-1", pull), f.webPod(ns, "forced-1", pull)} {
		// Ten seconds of failed liveness probes: an app slow to listen on
		// a loaded machine is not restarted while the test watches it.
		p.Spec.Containers[0].LivenessProbe.FailureThreshold = 10
		if _, err := f.Admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]seen{}
	for _, name := range names {
		before[name] = f.waitRunning(t, ns, name, -1)
	}
	w := before["web-1"]
	// What the container wrote before the restart, and what is in its
	// emptyDir (written from the host, where the volume is mounted).
	if _, _, err := nodetest.Get(ctx, "http://"+w.ip+":8080/log?msg=before-the-restart"); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(f.StateDir, "volumes", w.uid, "scratch", "kept.txt")
	if err := os.WriteFile(scratch, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// web-1 is asked throughout the restart: every request is answered
	// by the same process.
	var mu sync.Mutex
	var asked int
	var failures []string
	stopAsking := make(chan struct{})
	asking := make(chan struct{})
	go func() {
		defer close(asking)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopAsking:
				return
			case <-tick.C:
			}
			code, body, err := nodetest.Get(ctx, "http://"+w.ip+":8080/started")
			mu.Lock()
			asked++
			if err != nil || code != 200 || strings.TrimSpace(body) != w.started {
				failures = append(failures, fmt.Sprintf("%s: %d %q %v", time.Now().Format(time.StampMilli), code, body, err))
			}
			mu.Unlock()
		}
	}()

	restarting := time.Now()
	// The agent restarts as bex-node does, with a sandbox Manager of its
	// own; meanwhile:
	f.RestartAgent(t, func(*node.Options) {
		// No agent runs: the containers do, and serve.
		for _, name := range names {
			if code, _, err := nodetest.Get(ctx, "http://"+before[name].ip+":8080/"); err != nil || code != 200 {
				t.Errorf("GET / of %s while no agent runs: %d %v, want 200", name, code, err)
			}
		}
		// Meanwhile exits-1's process ends, deleted-1 is deleted (it
		// waits for its node to stop it) and forced-1 is removed at once.
		_, _, _ = nodetest.Get(ctx, "http://"+before["exits-1"].ip+":8080/exit")
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "deleted-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "forced-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	})
	restarted := time.Now()

	// The new agent stops what is no longer a Pod's, and restarts what
	// exited by its restart policy, counting a restart.
	platformtest.Eventually(t, 60*time.Second, "deleted-1 is stopped and removed", func(ctx context.Context) error {
		if _, err := f.getPod(ctx, ns, "deleted-1"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleted-1 still there: %v", err)
		}
		return nil
	})
	for _, name := range []string{"deleted-1", "forced-1"} {
		ip := before[name].ip
		platformtest.Eventually(t, 60*time.Second, name+"'s container is stopped", func(ctx context.Context) error {
			if code, _, err := nodetest.Get(ctx, "http://"+ip+":8080/"); err == nil {
				return fmt.Errorf("GET / of %s answers %d", name, code)
			}
			if _, err := os.Stat(filepath.Join(f.StateDir, "containers", before[name].uid+".json")); !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("the record of %s is still there: %v", name, err)
			}
			return nil
		})
	}
	exits := f.waitRunning(t, ns, "exits-1", before["exits-1"].restarts+1)
	if p, err := f.getPod(ctx, ns, "exits-1"); err != nil {
		t.Fatal(err)
	} else if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 4 {
		t.Errorf("exits-1's last state %+v, want terminated with exit code 4", last)
	}
	if exits.ip != before["exits-1"].ip {
		t.Errorf("exits-1 restarted on %s, not its Pod IP %s", exits.ip, before["exits-1"].ip)
	}

	// web-1 is the same process, with the same status: Ready since
	// before the restart, no restart, the same start.
	after := f.waitRunning(t, ns, "web-1", w.restarts)
	if after.started != w.started || after.containerID != w.containerID || !after.startedAt.Equal(&w.startedAt) || !after.readySince.Equal(&w.readySince) {
		t.Errorf("web-1 after the restart %+v, before %+v: want the same process, container, start and readiness", after, w)
	}
	if b, err := os.ReadFile(scratch); err != nil || string(b) != "kept\n" {
		t.Errorf("web-1's emptyDir after the restart: %q %v, want kept", b, err)
	}
	// Its log, through the apiserver: before and after the restart.
	if _, _, err := nodetest.Get(ctx, "http://"+w.ip+":8080/log?msg=after-the-restart"); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 20*time.Second, "web-1's log has the lines of before and after the restart", func(ctx context.Context) error {
		b, err := f.Admin.CoreV1().Pods(ns).GetLogs("web-1", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "before-the-restart") || !strings.Contains(string(b), "after-the-restart") {
			return fmt.Errorf("log %q", b)
		}
		return nil
	})
	// Its probes go on (a period of a second each): a few periods pass
	// with it Ready and not restarted, still asked.
	platformtest.Eventually(t, 10*time.Second, "three probe periods after the restart", func(context.Context) error {
		if time.Since(restarted) < 3*time.Second {
			return errors.New("waiting for three probe periods")
		}
		return nil
	})
	close(stopAsking)
	<-asking
	mu.Lock()
	t.Logf("web-1 answered %d of %d requests through the restart (the old agent's stop to the new one's start: %s)",
		asked-len(failures), asked, restarted.Sub(restarting).Round(time.Millisecond))
	if len(failures) > 0 {
		t.Errorf("web-1 did not answer as the same process through the restart:\n%s", strings.Join(failures, "\n"))
	}
	mu.Unlock()
	if p, err := f.getPod(ctx, ns, "web-1"); err != nil || !podReady(p) || p.Status.ContainerStatuses[0].RestartCount != w.restarts {
		t.Fatalf("web-1 after the probes went on: %v, %+v", err, p.Status)
	}

	// The adopted container is deleted as one the agent started: it
	// serves through its preStop sleep, then gets SIGTERM, and goes.
	t.Run("DeletesAnAdoptedContainerWithItsGracePeriod", func(t *testing.T) {
		logCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		rc, err := f.Admin.CoreV1().Pods(ns).GetLogs("web-1", &corev1.PodLogOptions{Follow: true}).Stream(logCtx)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var log platformtest.SyncBuffer
		go func() { _, _ = io.Copy(&log, rc) }()
		deleted := time.Now()
		if err := f.Admin.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for half := deleted.Add(sleep * time.Second / 2); time.Now().Before(half); <-tick.C {
			code, body, err := nodetest.Get(ctx, "http://"+w.ip+":8080/started")
			if err != nil || code != 200 || strings.TrimSpace(body) != w.started {
				t.Fatalf("GET /started of deleted web-1 into its preStop sleep: %d %q %v, want %s", code, body, err, w.started)
			}
		}
		if strings.Contains(log.String(), "shutting down") {
			t.Fatalf("web-1 got SIGTERM in its preStop sleep:\n%s", log.String())
		}
		platformtest.Eventually(t, 60*time.Second, "web-1 got SIGTERM and is gone with its volume", func(ctx context.Context) error {
			if !strings.Contains(log.String(), "shutting down") {
				return fmt.Errorf("no SIGTERM in the log %q", log.String())
			}
			if _, err := f.getPod(ctx, ns, "web-1"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod still there: %v", err)
			}
			if _, err := os.Stat(filepath.Dir(scratch)); !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("its emptyDir is still there: %v", err)
			}
			return nil
		})
	})
}
