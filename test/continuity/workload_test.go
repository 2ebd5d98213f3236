package continuity_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

const (
	// workloadCluster is the local cluster the tenant's app runs on.
	workloadCluster = "tenants-1"
	// workloadWarmUp and workloadCoolDown are how long the tenant works
	// on the cluster before the FleetUpgrade and after it: a round each.
	workloadWarmUp, workloadCoolDown = 15 * time.Second, 15 * time.Second
	// workloadWorkers is how many workers the cluster has: two, so that
	// the app has a worker to move to while the FleetUpgrade replaces each
	// (the MachineDeployment's maxSurge is 0, as the control plane's).
	workloadWorkers = 2
	// requestEvery is the load generator's pace on the app's URL.
	requestEvery = 100 * time.Millisecond
	// rollbackEvery makes every third release of the tenant a rollback.
	rollbackEvery = 3
)

// runWorkloadScenario runs bex-embedded as make run does, with its local
// fleet, makes a cluster of three control-plane machines at fromVersion
// and two workers through the API, places a tenant's app on it (a Pod on
// a worker, served through the edge), then has a FleetUpgrade with
// wireMVP roll the cluster's control plane to toVersion through the real
// KubeadmControlPlane, then its workers through their MachineDeployment,
// while the tenant pushes, reads logs and rolls back and a load generator
// asks the app's URL every 100 ms.
func runWorkloadScenario(t *testing.T, bin string) *workloadReport {
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// The platform's own context is not ctx: it is stopped by SIGINT at
	// the end, as Ctrl-C stops make run, so that its machines stop too.
	p := platformtest.Start(context.Background(), t, bin, t.TempDir(), pgtest.NewDatabase(t))
	env := p.WaitEnv(ctx, t)
	op, err := apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.WaitFleetReady(t, p)
	from, to := "v"+fromVersion, "v"+toVersion
	lc := platformtest.CreateLocalCluster(ctx, t, op, apiclient.CreateLocalClusterRequest{Name: workloadCluster, Version: from, ControlPlaneReplicas: 3, WorkerReplicas: workloadWorkers})
	platformtest.WaitClusterHealthy(t, op, lc.Name, from, 3)
	mgmt := platformtest.Client(t, env["BEX_KUBECONFIG"])
	workload := platformtest.WorkloadClient(t, mgmt, workloadCluster)
	workers := platformtest.WaitWorkers(t, workload, time.Time{}, workloadWorkers)
	platformtest.WaitLocalStandby(t, mgmt, workloadCluster)
	t.Logf("cluster %s: three %s machines and workers %s ready %s after the start", lc.Name, from, workers, time.Since(started).Round(time.Second))

	// The tenant's app, placed on the cluster and served from a Pod on
	// its worker.
	dev, remote := createSite(t, env)
	u := &workloadTenant{t: t, api: dev, apps: platformtest.AppClient(t, env), repo: t.TempDir(), remote: remote,
		host: "site-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0], releases: map[int]string{}}
	u.round.Store(string(before))
	platformtest.Git(t, u.repo, "init", "-q", "-b", "main")
	if !u.push(ctx, 1) {
		t.Fatalf("the first push failed: %+v", u.samples)
	}
	platformtest.ServedFrom(t, env, mgmt, "site", workloadCluster, "site v1")
	podNode := appPodNode(t, workload)
	if !slices.Contains(workers, podNode) {
		t.Fatalf("the app's Pod runs on %q, want a worker of %s", podNode, workers)
	}
	t.Logf("the app served from a Pod on %s %s after the start", podNode, time.Since(started).Round(time.Second))

	rep := &workloadReport{Cluster: lc.Name, From: fromVersion, To: toVersion, WireMVP: true, Worker: podNode}
	mw := localinfratest.WatchMachines(mgmt, apiclient.LocalClusterNamespace, workloadCluster,
		localinfratest.WatchOptions{Interval: 250 * time.Millisecond, ControlPlane: true, Hook: fleetupgrade.GateHook})
	defer mw.Close()
	// The load generator on the app's URL, and the tenant.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	stopRequests := platformtest.Meanwhile(loadCtx, requestEvery, u.request)
	var wg sync.WaitGroup
	wg.Go(func() { u.tenantLoop(loadCtx) })

	time.Sleep(workloadWarmUp)
	u.round.Store(string(during))
	rep.Plan = planStages(t, op, to)
	const upgrade = "tenants-to-1-37"
	rep.RolloutStart = time.Now()
	// As the operator would: bex upgrade start tenants-to-1-37 --to v1.37.2
	// --wire-mvp --soak 0s.
	if _, err := op.CreateUpgrade(ctx, apiclient.CreateUpgradeRequest{Name: upgrade, TargetVersion: to, WireMVP: true, Soak: "0s"}); err != nil {
		t.Fatalf("starting the FleetUpgrade: %v", err)
	}
	var up apiclient.Upgrade
	for deadline := time.Now().Add(15 * time.Minute); ; {
		up, err = op.GetUpgrade(ctx, upgrade, false)
		if err != nil {
			t.Errorf("reading the FleetUpgrade: %v", err)
		} else if up.Phase == "Succeeded" && allAt(mgmt, to) {
			rep.Rollout = "completed"
			break
		} else if up.Phase == "Failed" || up.Phase == "Aborted" {
			rep.Rollout = up.Phase + ": " + conditionMessage(up)
			break
		}
		if time.Now().After(deadline) {
			rep.Rollout = fmt.Sprintf("timed out in phase %s: %s", up.Phase, conditionMessage(up))
			break
		}
		time.Sleep(time.Second)
	}
	rep.RolloutEnd = time.Now()
	u.round.Store(string(after))
	time.Sleep(workloadCoolDown)
	stopRequests()
	stopLoad()
	wg.Wait()
	mw.Close()
	t.Logf("rollout %s in %s", rep.Rollout, rep.RolloutEnd.Sub(rep.RolloutStart).Round(time.Second))

	if up, err = op.GetUpgrade(ctx, upgrade, false); err == nil {
		rep.Gates = gatesOf(up)
	}
	// Where the app ran at the end: on a worker the rollout made, with
	// the target's kubelet.
	rep.PodNode = appPodNode(t, workload)
	if n, err := workload.CoreV1().Nodes().Get(ctx, rep.PodNode, metav1.GetOptions{}); err != nil || n.Status.NodeInfo.KubeletVersion != to || slices.Contains(workers, rep.PodNode) {
		t.Errorf("after the rollout the app's Pod runs on %q (%v): want a new worker with kubelet %s, none of %s", rep.PodNode, err, to, workers)
	}
	rep.fill(u, machinesSeen(mw), time.Since(started))
	p.Interrupt(t)
	return rep
}

// appPodNode returns the node of the tenant's running Pod on the cluster,
// or what it found instead.
func appPodNode(t *testing.T, workload kubernetes.Interface) string {
	t.Helper()
	var node string
	platformtest.Eventually(t, time.Minute, "one running Pod of the app", func(ctx context.Context) error {
		pods, err := workload.CoreV1().Pods("dev").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		if len(running) != 1 {
			return fmt.Errorf("%d running Pods in dev of %d", len(running), len(pods.Items))
		}
		node = running[0].Spec.NodeName
		return nil
	})
	return node
}

// allAt reports whether every Machine of the cluster, control plane and
// workers, runs version, none being deleted.
func allAt(mgmt client.Client, version string) bool {
	var list clusterv1.MachineList
	if err := mgmt.List(context.Background(), &list, client.InNamespace(apiclient.LocalClusterNamespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: workloadCluster}); err != nil {
		return false
	}
	for _, m := range list.Items {
		if m.Spec.Version != version || !m.DeletionTimestamp.IsZero() {
			return false
		}
	}
	return len(list.Items) == 3+workloadWorkers
}

// workloadTenant is the tenant of the app on the workload cluster and the
// load generator on its URL.
type workloadTenant struct {
	t      *testing.T
	api    *apiclient.Client
	apps   *http.Client
	host   string
	repo   string
	remote string

	round atomic.Value // phase

	mu      sync.Mutex
	samples []sample

	// releases maps the tenant's release numbers to what they serve;
	// only the tenant loop uses it.
	releases map[int]string
	last     int // the release of the last push
}

func (u *workloadTenant) record(kind string, start time.Time, ok bool, status, detail string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.samples = append(u.samples, sample{At: start, Phase: phase(u.round.Load().(string)), Kind: kind, OK: ok, Status: status,
		Latency: time.Since(start), Detail: detail})
}

var releasedRE = regexp.MustCompile(`Released v(\d+)`)

// push commits and pushes version i of the app, then checks that the
// release serves it through the edge.
func (u *workloadTenant) push(ctx context.Context, i int) bool {
	start := time.Now()
	body := fmt.Sprintf("site v%d", i)
	platformtest.WriteNodeApp(u.t, u.repo, body, "")
	platformtest.Git(u.t, u.repo, "add", "-A")
	platformtest.Git(u.t, u.repo, "commit", "-q", "-m", body)
	out, err := platformtest.GitErr(u.repo, "push", u.remote, "main")
	m := releasedRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		u.record("push", start, false, "error", lastLines(out, 16))
		return false
	}
	u.record("push", start, true, "ok", "")
	n, _ := strconv.Atoi(m[1])
	u.releases[n], u.last = body, n
	return u.served(ctx, "serve", start, body)
}

// rollback rolls the app back to release n and checks that it serves
// that release's body again.
func (u *workloadTenant) rollback(ctx context.Context, n int) bool {
	start := time.Now()
	// A rollback the load's end interrupts still runs to its end.
	rb, err := u.api.Rollback(context.WithoutCancel(ctx), "site", n)
	ok, status, detail := statusOf(err)
	u.record("rollback", start, ok, status, detail)
	if !ok {
		return false
	}
	u.releases[rb.Release] = u.releases[n]
	return u.served(ctx, "rollback served", start, u.releases[n])
}

// served waits up to two minutes for the app to answer body through the
// edge, and records whether it did as of the action begun at start (its
// latency is then the action's to live).
func (u *workloadTenant) served(ctx context.Context, kind string, start time.Time, body string) bool {
	// An action the load's end interrupts is still checked to the end.
	ctx = context.WithoutCancel(ctx)
	last := ""
	for since := time.Now(); time.Since(since) < 2*time.Minute; {
		code, got, err := platformtest.GetApp(ctx, u.apps, u.host)
		if err == nil && code == http.StatusOK && got == body {
			u.record(kind, start, true, "ok", body)
			return true
		}
		last = fmt.Sprintf("%d %q %v", code, got, err)
		time.Sleep(200 * time.Millisecond)
	}
	u.record(kind, start, false, "not served", "want "+body+", last "+last)
	return false
}

// logs reads the app's last lines through the API, as bex logs does, and
// expects the app's own lines among them.
func (u *workloadTenant) logs(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	start := time.Now()
	lines := 0
	err := u.api.Logs(ctx, "site", 50, false, func(l apiclient.LogLine) error {
		if strings.HasPrefix(l.Text, "served ") || strings.HasPrefix(l.Text, "listening on") {
			lines++
		}
		return nil
	})
	ok, status, detail := statusOf(err)
	if ok && lines == 0 {
		ok, status = false, "no app lines"
	}
	u.record("logs", start, ok, status, detail)
}

// tenantLoop pushes a new version every few seconds, each checked to
// serve what was pushed, reads the logs after each, and every third time
// rolls back to the previous push instead of pushing.
func (u *workloadTenant) tenantLoop(ctx context.Context) {
	prev := u.last
	for i := 2; ctx.Err() == nil; i++ {
		start := time.Now()
		if i%rollbackEvery == 0 && prev != 0 {
			u.rollback(ctx, prev)
		} else {
			before := u.last
			if u.push(ctx, i) {
				prev = before
			}
		}
		u.logs(ctx)
		if wait := 3*time.Second - time.Since(start); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// request asks the app's URL through the edge and records the answer: a
// 200 with one of the tenant's versions, or the failure with its status.
func (u *workloadTenant) request(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	code, body, err := platformtest.GetApp(ctx, u.apps, u.host)
	switch {
	case err != nil:
		u.record("request", start, false, "error", err.Error())
	case code != http.StatusOK:
		u.record("request", start, false, strconv.Itoa(code), short(body, 200))
	case !strings.HasPrefix(body, "site v"):
		u.record("request", start, false, "wrong body", short(body, 200))
	default:
		u.record("request", start, true, "200", "")
	}
	return nil
}

// machineTimes is what the watch saw of one control-plane Machine.
type machineTimes struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Created is when the watch first saw it (zero: there at the start).
	Created time.Time `json:"created"`
	// Marked is when it saw KubeadmControlPlane's mark for deletion;
	// Released when the gate's deletion hook was gone from the marked
	// Machine; Gone when the Machine was.
	Marked   time.Time `json:"marked"`
	Released time.Time `json:"released"`
	Gone     time.Time `json:"gone"`
	// JoinedLB and LeftLB are when its apiserver was seen joining and
	// leaving the cluster's load balancer (zero: not seen; the watch needs
	// the Host that runs the machines).
	JoinedLB time.Time `json:"joinedLB"`
	LeftLB   time.Time `json:"leftLB"`
	// ReplacedBy is the first Machine created after it was marked
	// (maxSurge 0: its replacement).
	ReplacedBy string `json:"replacedBy,omitempty"`
}

// machinesSeen returns the control-plane Machines w saw: those
// KubeadmControlPlane marked for deletion in the order it marked them, each
// with the Machine created after it was marked (maxSurge 0: its
// replacement), then those never marked.
func machinesSeen(w *localinfratest.MachineWatch) []machineTimes {
	var out []machineTimes
	for _, ml := range w.Snapshot() {
		mt := machineTimes{Name: ml.Name, Version: strings.TrimPrefix(ml.Version, "v"), Marked: ml.Marked, Released: ml.Released, Gone: ml.Gone,
			JoinedLB: ml.JoinedLB, LeftLB: ml.LeftLB}
		if !ml.Existing {
			mt.Created = ml.Created
		}
		out = append(out, mt)
	}
	byCreation := slices.Clone(out)
	slices.SortFunc(byCreation, func(a, b machineTimes) int { return a.Created.Compare(b.Created) })
	for i := range out {
		if out[i].Marked.IsZero() {
			continue
		}
		for _, n := range byCreation {
			if !n.Created.IsZero() && !n.Created.Before(out[i].Marked) {
				taken := false
				for _, o := range out[:i] {
					taken = taken || o.ReplacedBy == n.Name
				}
				if !taken {
					out[i].ReplacedBy = n.Name
					break
				}
			}
		}
	}
	return out
}
