package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

// maxSummary bounds the stats summary read from one node: a kubelet's
// for 110 Pods is well under a megabyte.
const maxSummary = 16 << 20

var _ runtime.UsageReader = (*Driver)(nil)

// Usage implements runtime.UsageReader: it lists the app's Pods in the
// tenant's namespace by the app's labels, and reads the kubelet's stats
// summary of each node they run on (nodeSummary: through the apiserver's
// node proxy, GET /api/v1/nodes/NODE/proxy/stats/summary, which wants get
// on nodes/proxy). An instance is the Pod Status names
// (process, index, the Pod's name as ID); its CPUSeconds are its
// containers' usageCoreNanoSeconds, its MemoryBytes their
// workingSetBytes. A Pod not bound or not running, or that the node's
// summary leaves out (its container does not run), is left out. An app
// without Pods is ErrNotFound; a node that does not answer fails the call,
// naming it. A node's summary read less than Options.SummaryMaxAge ago is
// used again (a failed read is not kept): a sampler that asks for every
// app in turn reads each node about once per round.
func (d *Driver) Usage(ctx context.Context, tenant, app string) ([]runtime.Usage, error) {
	ns := d.opts.Namespace(tenant)
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(ns), appSelector(app)); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("%s/%s: %w", tenant, app, runtime.ErrNotFound)
	}
	insts := instancesFrom(pods.Items) // sorts pods.Items the same way
	return d.usageFrom(ctx, ns, pods.Items, insts)
}

// usageFrom reads the usage of an app's pods in namespace ns, insts being
// their instances (instancesFrom, which sorted pods: insts[i] is pods[i]'s).
func (d *Driver) usageFrom(ctx context.Context, ns string, pods []corev1.Pod, insts []runtime.Instance) ([]runtime.Usage, error) {
	type podKey struct{ name, uid string }
	byNode := map[string]map[podKey]runtime.Instance{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if byNode[p.Spec.NodeName] == nil {
			byNode[p.Spec.NodeName] = map[podKey]runtime.Instance{}
		}
		byNode[p.Spec.NodeName][podKey{p.Name, string(p.UID)}] = insts[i]
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	out := []runtime.Usage{}
	for _, node := range nodes {
		summary, err := d.summaries.get(ctx, node, d.opts.SummaryMaxAge, d.nodeSummary)
		if err != nil {
			return nil, err
		}
		for _, ps := range summary.Pods {
			if ps.PodRef.Namespace != ns {
				continue
			}
			inst, ok := byNode[node][podKey{ps.PodRef.Name, ps.PodRef.UID}]
			if !ok || len(ps.Containers) == 0 {
				continue
			}
			u := runtime.Usage{Process: inst.Process, Index: inst.Index, ID: inst.ID}
			for _, c := range ps.Containers {
				if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
					u.CPUSeconds += float64(*c.CPU.UsageCoreNanoSeconds) / 1e9
				}
				if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
					u.MemoryBytes += int64(*c.Memory.WorkingSetBytes)
				}
			}
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Process != out[j].Process {
			return out[i].Process < out[j].Process
		}
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// summaryCache keeps each node's last stats summary. The zero value is
// ready; it is safe for concurrent use, and callers asking for one node at
// once wait for one read.
type summaryCache struct {
	mu    sync.Mutex
	nodes map[string]*cachedSummary
	// swept is when get last looked for nodes gone.
	swept time.Time
}

type cachedSummary struct {
	mu sync.Mutex
	at time.Time
	s  *statsv1alpha1.Summary
}

// get returns node's summary read by read less than maxAge ago, or reads
// it. Entries older than a minute past maxAge (nodes gone) are dropped,
// looked for at most once a minute: get is called for every app of a
// sampler's round.
func (c *summaryCache) get(ctx context.Context, node string, maxAge time.Duration,
	read func(context.Context, string) (*statsv1alpha1.Summary, error)) (*statsv1alpha1.Summary, error) {
	now := time.Now()
	c.mu.Lock()
	if c.nodes == nil {
		c.nodes = map[string]*cachedSummary{}
	}
	e := c.nodes[node]
	if e == nil {
		e = &cachedSummary{}
		c.nodes[node] = e
	}
	if now.Sub(c.swept) > time.Minute {
		c.swept = now
		for n, o := range c.nodes {
			if o != e && o.mu.TryLock() {
				if !o.at.IsZero() && now.Sub(o.at) > maxAge+time.Minute {
					delete(c.nodes, n)
				}
				o.mu.Unlock()
			}
		}
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.s != nil && time.Since(e.at) < maxAge {
		return e.s, nil
	}
	s, err := read(ctx, node)
	if err != nil {
		return nil, err
	}
	e.s, e.at = s, time.Now()
	return s, nil
}

// nodeSummary reads the stats summary of node through the apiserver's
// node proxy. The apiserver proxies only to a node whose address is a
// global unicast one; a node on a loopback address (a local fleet's
// workers, on 127.x) is read directly, as metrics-server reads kubelets:
// at its InternalIP and kubelet port, with the client certificate and CA
// of the driver's rest.Config (the node's serving certificate must be of
// that CA). Any other address the apiserver refuses stays refused.
func (d *Driver) nodeSummary(ctx context.Context, node string) (*statsv1alpha1.Summary, error) {
	rc, err := d.cs.CoreV1().RESTClient().Get().
		Resource("nodes").Name(node).SubResource("proxy").Suffix("stats", "summary").
		Stream(ctx)
	if apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "address not allowed") {
		rc, err = d.directSummary(ctx, node)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the stats summary of node %s: %w", node, err)
	}
	defer rc.Close()
	var s statsv1alpha1.Summary
	if err := json.NewDecoder(io.LimitReader(rc, maxSummary)).Decode(&s); err != nil {
		return nil, fmt.Errorf("reading the stats summary of node %s: %w", node, err)
	}
	return &s, nil
}

// directSummary opens GET /stats/summary on node's own API.
func (d *Driver) directSummary(ctx context.Context, node string) (io.ReadCloser, error) {
	n, err := d.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var addr string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = a.Address
			break
		}
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if addr == "" || port == 0 {
		return nil, errors.New("the node has no InternalIP or kubelet port")
	}
	// Only a loopback address is read directly: the apiserver refuses
	// link-local ones too (a cloud's metadata service), and so does this.
	if ip, err := netip.ParseAddr(addr); err != nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("the apiserver proxies to no address %s, and it is no loopback address to read directly", addr)
	}
	rc, ok := d.cs.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc.Client == nil {
		return nil, errors.New("the driver's client has no HTTP client")
	}
	u := url.URL{Scheme: "https", Host: net.JoinHostPort(addr, strconv.Itoa(int(port))), Path: "/stats/summary"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := rc.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s: %s", u.String(), resp.Status, strings.TrimSpace(string(b)))
	}
	return resp.Body, nil
}
