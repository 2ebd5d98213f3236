package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

// LabelKeptLogOf labels the Secret that keeps the lines of an app's
// replaced Pods (KeptLogName) with the app's name. It is not LabelApp:
// the Secrets of that label are the releases' environments.
const LabelKeptLogOf = "bex.co/kept-log-of"

// Bounds of the lines kept of an app's replaced Pods: the newest
// keptLogLines lines, at most keptLogBytes of text in all (a Secret holds
// 1 MiB, and the JSON around each line adds to it), as the process
// runtime keeps an app's last 1,000 lines across its releases.
const (
	keptLogLines = 1000
	keptLogBytes = 512 << 10
	// keptLineBytes bounds a kept line: the rest is cut, as the process
	// runtime splits its lines at 16 KiB.
	keptLineBytes = 16 << 10
	// keptSecretBytes bounds the Secret's data, under the 1 MiB an
	// object may have in etcd.
	keptSecretBytes = 900 << 10
)

// KeptLogName is the name of the Secret that keeps the lines of the app's
// replaced Pods: a Secret, since an app may print what it must not show
// to anyone but its tenant.
func KeptLogName(app string) string { return app + "-kept-log" }

// keptLine is a line of a replaced Pod, as the kept-log Secret stores it.
type keptLine struct {
	Pod      string    `json:"pod"`
	Process  string    `json:"process"`
	Instance int       `json:"instance"`
	Time     time.Time `json:"time"`
	// Stream is stderr for a line of it where the cluster serves the
	// streams apart; empty for stdout.
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text"`
}

// keptLogData is the key of the kept-log Secret's data that holds its
// lines, as a JSON array, oldest first.
const keptLogData = "lines.json"

// lineKeeper follows the log of each Pod an app had when a deploy began,
// to the end of its container, so that what those Pods wrote, up to their
// last line, outlives them: the lines of the Pods that ended are added to
// the app's kept-log Secret, whether the deploy went out (keep) or not
// (drop, the Pods it was to replace serving on).
type lineKeeper struct {
	d      *Driver
	ns     string
	app    string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	lines   []keptLine
	ended   map[string]bool               // pod → its stream ended
	cancels map[string]context.CancelFunc // pod → the end of its stream
}

// keepLines starts following the logs of pods, the app's instance Pods
// before a deploy (instancePods), for at most patience: beyond it, a Pod that still runs
// (one the deploy did not replace) is not one whose lines need keeping.
func (d *Driver) keepLines(ctx context.Context, ns, app string, pods []podRef, patience time.Duration) *lineKeeper {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), patience)
	k := &lineKeeper{d: d, ns: ns, app: app, cancel: cancel, ended: map[string]bool{}, cancels: map[string]context.CancelFunc{}}
	for _, p := range pods {
		ctx, cancel := context.WithCancel(ctx)
		k.cancels[p.name] = cancel
		k.wg.Go(func() {
			defer cancel()
			log, err := d.openLog(ctx, ns, p, keptLogLines, nil)
			if err != nil {
				return
			}
			defer log.Close()
			// The newest lines only, as the Secret will hold them: a Pod
			// that writes much for the rollout's length holds at most
			// twice the bounds here.
			var lines []keptLine
			size := 0
			log.read(p, func(l runtime.LogLine) bool {
				text := l.Text
				if len(text) > keptLineBytes {
					text = text[:keptLineBytes]
				}
				stream := ""
				if l.Stream == runtime.Stderr {
					stream = runtime.Stderr
				}
				lines = append(lines, keptLine{Pod: p.name, Process: l.Process, Instance: l.Instance, Time: l.Time, Stream: stream, Text: text})
				size += len(text)
				if len(lines) == 2*keptLogLines || size > 2*keptLogBytes {
					lines, size = newest(lines)
				}
				return true
			})
			lines, _ = newest(lines)
			k.mu.Lock()
			defer k.mu.Unlock()
			k.lines = append(k.lines, lines...)
			// A stream cut by the patience's end is not a Pod that ended.
			k.ended[p.name] = ctx.Err() == nil
		})
	}
	return k
}

// drop stops following, once a deploy did not go out: the Pods it was
// to replace serve on. The lines of those that ended meanwhile are kept.
func (k *lineKeeper) drop() {
	k.cancel()
	k.finish()
}

// keep stops following the Pods that the deploy did not replace (still
// there and not being deleted: a restart of another process) and keeps
// the lines of the others once their streams end (finish).
func (k *lineKeeper) keep(ctx context.Context) {
	var pods corev1.PodList
	if err := k.d.c.List(ctx, &pods, client.InNamespace(k.ns), appSelector(k.app)); err != nil {
		k.drop()
		return
	}
	for _, p := range pods.Items {
		if cancel := k.cancels[p.Name]; cancel != nil && p.DeletionTimestamp == nil {
			cancel()
		}
	}
	k.finish()
}

// finish waits, in the background, until the followed Pods' streams end,
// then adds the lines of those whose Pod ended (not cut short) to the
// kept-log Secret, under the app's lock; what fails is lost, not retried.
func (k *lineKeeper) finish() {
	go func() {
		k.wg.Wait()
		k.cancel()
		k.mu.Lock()
		var lines []keptLine
		for _, l := range k.lines {
			if k.ended[l.Pod] {
				lines = append(lines, l)
			}
		}
		k.mu.Unlock()
		if len(lines) == 0 {
			return
		}
		unlock := k.d.lock(k.ns, k.app)
		defer unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = k.d.addKeptLines(ctx, k.ns, k.app, lines)
	}()
}

// keptLines reads the kept-log Secret of app: none when there is none.
func (d *Driver) keptLines(ctx context.Context, ns, app string) ([]keptLine, error) {
	var sec corev1.Secret
	err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: KeptLogName(app)}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the kept lines of %s: %w", app, err)
	}
	var lines []keptLine
	if err := json.Unmarshal(sec.Data[keptLogData], &lines); err != nil {
		return nil, fmt.Errorf("reading the kept lines of %s: secret %s: %w", app, sec.Name, err)
	}
	return lines, nil
}

// newest is the newest of lines (oldest first) within keptLogLines and
// keptLogBytes of text, in a slice of its own, and their size.
func newest(lines []keptLine) ([]keptLine, int) {
	if len(lines) > keptLogLines {
		lines = lines[len(lines)-keptLogLines:]
	}
	size, i := 0, len(lines)
	for i > 0 && size+len(lines[i-1].Text) <= keptLogBytes {
		size += len(lines[i-1].Text)
		i--
	}
	return slices.Clone(lines[i:]), size
}

// addKeptLines adds lines to the kept-log Secret of app, keeping the
// newest within keptLogLines and keptLogBytes.
func (d *Driver) addKeptLines(ctx context.Context, ns, app string, lines []keptLine) error {
	old, err := d.keptLines(ctx, ns, app)
	if err != nil {
		// Unreadable: written again from what is new.
		old = nil
	}
	all := append(old, lines...)
	slices.SortStableFunc(all, func(a, b keptLine) int { return a.Time.Compare(b.Time) })
	all, _ = newest(all)
	data, err := json.Marshal(all)
	// Text that JSON escapes (control characters) may outgrow a Secret:
	// the oldest quarter goes until it fits.
	for err == nil && len(data) > keptSecretBytes {
		all = all[(len(all)+3)/4:]
		data, err = json.Marshal(all)
	}
	if err != nil {
		return err
	}
	sec := corev1ac.Secret(KeptLogName(app), ns).
		WithLabels(map[string]string{LabelKeptLogOf: app, LabelManagedBy: managedBy}).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{keptLogData: data})
	if err := d.c.Apply(ctx, sec, applyOpts...); err != nil {
		return fmt.Errorf("keeping the lines of %s's replaced pods: %w", app, err)
	}
	return nil
}

// deleteKeptLines deletes the kept-log Secret of app.
func (d *Driver) deleteKeptLines(ctx context.Context, ns, app string) error {
	return d.deleteIgnoringNotFound(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: KeptLogName(app)}})
}

// keptLogLinesOf are the kept lines of app's replaced Pods as log lines,
// but those of Pods that still exist (live): their own log has them.
func (d *Driver) keptLogLinesOf(ctx context.Context, ns, app string, live []podRef) []runtime.LogLine {
	kept, err := d.keptLines(ctx, ns, app)
	if err != nil || len(kept) == 0 {
		return nil
	}
	exists := map[string]bool{}
	for _, p := range live {
		exists[p.name] = true
	}
	out := make([]runtime.LogLine, 0, len(kept))
	for _, l := range kept {
		if !exists[l.Pod] {
			stream := runtime.Stdout
			if l.Stream == runtime.Stderr {
				stream = runtime.Stderr
			}
			out = append(out, runtime.LogLine{Time: l.Time, Process: l.Process, Instance: l.Instance, Stream: stream, Text: l.Text})
		}
	}
	return out
}
