package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/procstat"
)

// kubeProfileSeconds is how long the kube-apiserver's CPU profile runs: the
// start of the review phase, which lasts longer at the default -reviews.
const kubeProfileSeconds = 5

// startProfiles starts a CPU profile of this process to dir/bench-NAME.pprof
// and, with kube, one of the kube-apiserver's to
// dir/kube-apiserver-NAME.pprof. The function it returns stops them. An
// empty dir profiles nothing.
func startProfiles(ctx context.Context, dir, name string, kube *controlplane.APIServer, withKube bool) (func() error, error) {
	if dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "bench-"+name+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	kubeDone := make(chan error, 1)
	if withKube {
		go func() { kubeDone <- kubeProfile(ctx, kube, filepath.Join(dir, "kube-apiserver-"+name+".pprof")) }()
	} else {
		kubeDone <- nil
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return err
		}
		if err := <-kubeDone; err != nil {
			return fmt.Errorf("profiling the kube-apiserver: %w", err)
		}
		fmt.Printf("profiles of the %s phase in %s\n", name, dir)
		return nil
	}, nil
}

// kubeProfile saves a CPU profile of the kube-apiserver (its
// /debug/pprof/profile, which --profiling serves to the admin) to path.
func kubeProfile(ctx context.Context, kube *controlplane.APIServer, path string) error {
	cfg := rest.CopyConfig(kube.RESTConfig())
	cfg.Timeout = (kubeProfileSeconds + 30) * time.Second
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kube.URL()+"/debug/pprof/profile?seconds="+strconv.Itoa(kubeProfileSeconds), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cpuTime is the user and system CPU time process pid has used, from
// /proc/PID/stat; zero when it cannot be read.
func cpuTime(pid int) time.Duration {
	f, err := procstat.Fields(pid)
	if err != nil {
		return 0
	}
	utime, err1 := procstat.Int(f, procstat.UTime)
	stime, err2 := procstat.Int(f, procstat.STime)
	if err1 != nil || err2 != nil {
		return 0
	}
	// The kernel counts in clock ticks of USER_HZ, 100 on Linux.
	return time.Duration(utime+stime) * (time.Second / 100)
}
