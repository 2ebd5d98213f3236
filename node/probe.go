package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs p against the Pod's address every period until ctx ends,
// the first time at once or once p's initial delay since from passed, and
// calls result whenever the outcome crosses a threshold: ok after
// successThreshold passes in a row, not ok after failureThreshold fails.
func (w *podWorker) probe(ctx context.Context, pod *corev1.Pod, c corev1.Container, p *corev1.Probe, kind string, from time.Time, result func(ok bool, msg string)) {
	period := seconds(p.PeriodSeconds, 10)
	timeout := seconds(p.TimeoutSeconds, 1)
	successes, failures := int(p.SuccessThreshold), int(p.FailureThreshold)
	if successes < 1 {
		successes = 1
	}
	if failures < 1 {
		failures = 3
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(from.Add(time.Duration(p.InitialDelaySeconds) * time.Second))):
	}
	passed, failed := 0, 0
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		err := w.probeOnce(ctx, c, p, timeout)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			passed, failed = passed+1, 0
			if passed == successes {
				result(true, "")
			}
		} else {
			passed, failed = 0, failed+1
			// Each failure, as the kubelet records them: the recorder's
			// correlator counts the same words in one Event (its count
			// and last timestamp), and holds back a Pod's flood.
			w.a.recorder.Eventf(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", kind, err)
			if failed == failures {
				result(false, err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func seconds(s, def int32) time.Duration {
	if s <= 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}

// probeOnce runs one probe against the Pod's address.
func (w *podWorker) probeOnce(ctx context.Context, c corev1.Container, p *corev1.Probe, timeout time.Duration) error {
	ip := w.snapshot().podIP
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		g := p.HTTPGet
		port, err := portOf(c, g.Port)
		if err != nil {
			return err
		}
		host := ip
		if g.Host != "" {
			host = g.Host
		}
		scheme := "http"
		if g.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
		if u.Path == "" {
			u.Path = "/"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "kube-probe/bex-node")
		for _, h := range g.HTTPHeaders {
			if h.Name == "Host" {
				req.Host = h.Value
			} else {
				req.Header.Add(h.Name, h.Value)
			}
		}
		resp, err := w.a.probes.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		port, err := portOf(c, p.TCPSocket.Port)
		if err != nil {
			return err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("unsupported probe")
}

// newProbeClient returns the client of HTTP probes: it follows no
// redirects (a redirect counts as success, as for the kubelet when it
// leads elsewhere) and trusts any certificate, as the kubelet's HTTPS
// probes do.
func newProbeClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// portOf resolves a probe's port, by number or by the container's port
// name.
func portOf(c corev1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %q has no port named %q", c.Name, p.StrVal)
}
