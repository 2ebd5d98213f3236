package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

// testLogs: Logs reads the app's lines through the apiserver's pods/log,
// which the apiserver proxies to the node's log endpoint (bex-node's, as
// a kubelet's): the last lines of all its instances in the order they
// were written, and, followed, a line written after.
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
	// say has the app of web.<index> print text, and waits until its
	// container's log has it: the next line is written after it.
	say := func(index int, text string) {
		t.Helper()
		pod := pods[index]
		ip := podIP(t, k.c, "acme", pod)
		if _, _, err := nodetest.Get(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(kube.WebPort))+"/log?msg="+url.QueryEscape(text)); err != nil {
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
	say(0, "hello from a")
	say(1, "hello from b")
	say(0, "third")

	ch, err := d.Logs(ctx, "acme", "logged", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range ch {
		got = append(got, fmt.Sprintf("%s.%d %s", l.Process, l.Instance, l.Text))
	}
	if want := "web.1 hello from b|web.0 third"; strings.Join(got, "|") != want {
		t.Errorf("tail 2: %q, want %q", strings.Join(got, "|"), want)
	}

	fctx, cancel := context.WithCancel(ctx)
	follow, err := d.Logs(fctx, "acme", "logged", 0, true)
	if err != nil {
		t.Fatal(err)
	}
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
		case <-tick.C:
			if _, _, err := nodetest.Get(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(kube.WebPort))+"/log?msg=followed"); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("a line written after Logs(follow) never arrived")
		}
	}
	cancel()
	for range follow {
	}
}
