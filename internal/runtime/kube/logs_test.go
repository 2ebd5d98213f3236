package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

// testLogs: Logs reads the app's lines through the apiserver's pods/log,
// which the apiserver proxies to the node's log endpoint (bex-node's, as
// a kubelet's): the last lines of all its instances in the order they
// were written, stdout and stderr apart (the cluster serves them apart:
// PodLogsQuerySplitStreams), with the platform's about each from its
// Pod's Events and readiness, and, followed, a line written after.
func testLogs(t *testing.T, k *cluster, d *kube.Driver) {
	ctx := context.Background()
	rel := shopRelease(1, k.image1)
	rel.App = "logged"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 2}}
	remove(t, d, rel.Tenant, rel.App)
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatal(err)
	}
	st, err := d.Status(ctx, "acme", "logged")
	if err != nil || len(st.Instances) != 2 {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	pods := map[int]string{} // instance index → pod
	for _, i := range st.Instances {
		pods[i.Index] = i.ID
	}
	// say has the app of web.<index> print text on stream, and waits
	// until its container's log has it: the next line is written after
	// it.
	say := func(index int, stream, text string) {
		t.Helper()
		pod := pods[index]
		ip := podIP(t, k.c, "acme", pod)
		if _, _, err := nodetest.Get(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(kube.WebPort))+"/log?stream="+stream+"&msg="+url.QueryEscape(text)); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 30*time.Second, "the line in the log of "+pod, func(ctx context.Context) error {
			b, err := k.Admin.CoreV1().Pods("acme").GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), text+"\n") {
				return fmt.Errorf("log %q", b)
			}
			return nil
		})
	}
	say(0, runtime.Stdout, "hello from a")
	say(1, runtime.Stderr, "hello from b")
	say(0, runtime.Stdout, "third")

	ch, err := d.Logs(ctx, "acme", "logged", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range ch {
		got = append(got, fmt.Sprintf("%s.%d %s %s", l.Process, l.Instance, l.Stream, l.Text))
	}
	if want := "web.1 stderr hello from b|web.0 stdout third"; strings.Join(got, "|") != want {
		t.Errorf("tail 2: %q, want %q", strings.Join(got, "|"), want)
	}

	// The whole log has the platform's lines about each instance (stream
	// bex), as the process runtime writes its own: the node's Events of
	// its Pod (its container started) and its readiness, before the
	// app's own lines.
	ch, err = d.Logs(ctx, "acme", "logged", -1, false)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	first := map[string]int{} // line → its first place
	for l := range ch {
		line := fmt.Sprintf("%s.%d %s %s", l.Process, l.Instance, l.Stream, l.Text)
		if _, ok := first[line]; !ok {
			first[line] = len(got)
		}
		got = append(got, line)
	}
	for index, stream := range []string{runtime.Stdout, runtime.Stderr} {
		started, startedOK := first[fmt.Sprintf("web.%d bex Started container web", index)]
		healthy, healthyOK := first[fmt.Sprintf("web.%d bex Healthy: ready to serve", index)]
		said, saidOK := first[fmt.Sprintf("web.%d %s hello from %c", index, stream, 'a'+index)]
		if !startedOK || !healthyOK || !saidOK || started > said || healthy > said {
			t.Errorf("the whole log of web.%d: %q; want its bex lines Started and Healthy before the app's line", index, got)
		}
	}

	// Followed with a tail of 2: the same two lines as the tail of 2
	// first, of the whole app, then only new lines.
	fctx, cancel := context.WithCancel(ctx)
	follow, err := d.Logs(fctx, "acme", "logged", 2, true)
	if err != nil {
		t.Fatal(err)
	}
	var firstFollowed []string
	// The follower may connect after the line is written; write until it
	// shows.
	ip := podIP(t, k.c, "acme", pods[1])
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for found := false; !found; {
		select {
		case l, ok := <-follow:
			if !ok {
				t.Fatal("follow channel closed early")
			}
			found = l.Text == "followed" && l.Process == "web" && l.Instance == 1
			if found && l.Stream != runtime.Stderr {
				t.Errorf("the line followed: %+v, want it on stderr", l)
			}
			if !found && (len(firstFollowed) < 2 || l.Stream != runtime.System) {
				// The platform's lines may come at a poll: new Events.
				firstFollowed = append(firstFollowed, fmt.Sprintf("%s.%d %s %s", l.Process, l.Instance, l.Stream, l.Text))
			}
		case <-tick.C:
			if _, _, err := nodetest.Get(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(kube.WebPort))+"/log?stream=stderr&msg=followed"); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("a line written after Logs(follow) never arrived")
		}
	}
	cancel()
	for range follow {
	}
	if want := "web.1 stderr hello from b|web.0 stdout third"; strings.Join(firstFollowed, "|") != want {
		t.Errorf("followed with a tail of 2, before the new line: %q, want %q", strings.Join(firstFollowed, "|"), want)
	}

	// Release 2 replaces both Pods: their lines, up to their last, are
	// kept (a Secret of the app's) and read with the new Pods', as the
	// process runtime keeps an app's lines across releases.
	rel2 := rel
	rel2.Number, rel2.Image = 2, k.image2
	if err := d.Deploy(ctx, rel2, nil); err != nil {
		t.Fatal(err)
	}
	var oldest string // the first of the app's lines
	platformtest.Eventually(t, time.Minute, "the replaced Pods gone, their lines in the log", func(ctx context.Context) error {
		var left corev1.PodList
		if err := k.c.List(ctx, &left, client.InNamespace("acme"), client.MatchingLabels{kube.LabelApp: "logged", kube.LabelRelease: "1"}); err != nil {
			return err
		}
		if len(left.Items) > 0 {
			return fmt.Errorf("%d Pods of release 1 left", len(left.Items))
		}
		ch, err := d.Logs(ctx, "acme", "logged", -1, false)
		if err != nil {
			return err
		}
		var got []string
		for l := range ch {
			if l.Stream != runtime.System {
				got = append(got, fmt.Sprintf("%s.%d %s %s", l.Process, l.Instance, l.Stream, l.Text))
			}
		}
		if len(got) > 0 {
			oldest = got[0]
		}
		for _, want := range []string{"web.0 stdout hello from a", "web.1 stderr hello from b", "web.0 stdout third", "web.1 stderr followed"} {
			if !slices.Contains(got, want) {
				return fmt.Errorf("no %q among %q", want, got)
			}
		}
		return nil
	})
	var kept corev1.Secret
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: kube.KeptLogName("logged")}, &kept); err != nil || kept.Labels[kube.LabelKeptLogOf] != "logged" {
		t.Errorf("the kept-log Secret: %v, labels %v", err, kept.Labels)
	}
	// A follower gets them too, before the live Pods' lines.
	fctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	follow, err = d.Logs(fctx, "acme", "logged", 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if l := <-follow; fmt.Sprintf("%s.%d %s %s", l.Process, l.Instance, l.Stream, l.Text) != oldest {
		t.Errorf("the first line followed: %+v, want release 1's first, %q", l, oldest)
	}
	cancel()
	for range follow {
	}
	// Remove takes them with the app.
	if err := d.Remove(ctx, "acme", "logged"); err != nil {
		t.Fatal(err)
	}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: kube.KeptLogName("logged")}, &kept); !apierrors.IsNotFound(err) {
		t.Errorf("the kept-log Secret after Remove: %v, want it gone", err)
	}
}
