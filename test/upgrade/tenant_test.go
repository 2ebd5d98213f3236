package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/internal/upgrade/verify"
)

// The tenant whose load runs through the load balancer.
const (
	tenantUser      = "acme-dev"
	tenantGroup     = "bex:tenant:acme"
	tenantNamespace = "tenant-acme"
	// verifyNamespace holds the verifier's probe objects.
	verifyNamespace = "bex-verify"
)

var (
	appsGVR           = platformv1alpha1.GroupVersion.WithResource("apps")
	routesGVR         = platformv1alpha1.GroupVersion.WithResource("routes")
	clusterCapacities = schema.GroupVersionResource{Group: "scheduling.bex.co", Version: "v1alpha1", Resource: "clustercapacities"}
)

// grantTenant creates the tenant's namespace and what a tenant may do: any
// verb on Apps and Routes in its namespace, and reading the scheduler's
// ClusterCapacities and the skew resources.
func grantTenant(ctx context.Context, admin *rest.Config, skew []schema.GroupVersionResource) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	for _, ns := range []string{tenantNamespace, verifyNamespace} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenantUser}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "tenant"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{platformv1alpha1.GroupVersion.Group}, Resources: []string{"apps", "routes"}, Verbs: []string{"*"}}},
	}
	if _, err := cs.RbacV1().Roles(tenantNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the tenant's role: %w", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects:   subject,
	}
	if _, err := cs.RbacV1().RoleBindings(tenantNamespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding the tenant's role: %w", err)
	}
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bex-upgrade-suite-tenant-reader"}}
	reader.Rules = append(reader.Rules, rbacv1.PolicyRule{APIGroups: []string{clusterCapacities.Group}, Resources: []string{clusterCapacities.Resource}, Verbs: []string{"get", "list"}})
	for _, gvr := range skew {
		reader.Rules = append(reader.Rules, rbacv1.PolicyRule{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get", "list"}})
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the tenant's reader role: %w", err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   subject,
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding the tenant's reader role: %w", err)
	}
	return nil
}

// waitTenantServed polls, as the tenant and on each apiserver directly,
// a list of Apps, Routes and ClusterCapacities until all answer 200: the
// RBAC rules reached every server and the aggregated API is available.
func waitTenantServed(ctx context.Context, cp *controlplane.ControlPlane) error {
	cfg, err := cp.UserConfig(tenantUser, tenantGroup)
	if err != nil {
		return err
	}
	servers := func(context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, s := range cp.APIServers() {
			if s.Running() {
				out[s.Name] = s.URL()
			}
		}
		return out, nil
	}
	return waitServed(ctx, cfg, servers, mvp.Path(appsGVR, tenantNamespace, ""), mvp.Path(routesGVR, tenantNamespace, ""), mvp.ListPath(clusterCapacities))
}

// waitServed polls, with cfg's identity, each path on every apiserver
// servers names (name to URL), until all answer 200.
func waitServed(ctx context.Context, cfg *rest.Config, servers func(context.Context) (map[string]string, error), paths ...string) error {
	var last error
	for {
		urls, err := servers(ctx)
		last = err
		for name, url := range urls {
			c := rest.CopyConfig(cfg)
			c.Host = url
			client, err := rest.HTTPClientFor(c)
			if err != nil {
				return err
			}
			for _, path := range paths {
				status, body, err := send(ctx, client, c.Host, http.MethodGet, path, "", nil)
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("%s on %s: %d %s", path, name, status, body)
				}
				if err != nil {
					last = err
				}
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the tenant is not served: %w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tenantRequest is one request of the tenant's load.
type tenantRequest struct {
	At       time.Time
	Duration time.Duration
	Worker   string
	Verb     string
	Resource schema.GroupVersionResource
	// Status is the HTTP status, 0 when no answer came.
	Status  int
	Message string
	// Skew marks a list of a resource only the other version serves: its
	// 404 is a failure only while an apiserver serves it (classify).
	Skew bool
	// Retries counts the transparent retries client-go would have made
	// (see retryLikeClientGo) before this answer.
	Retries int
}

// Kind names the request, such as "create platform.bex.co/v1alpha1/apps".
func (r tenantRequest) Kind() string { return r.Verb + " " + verify.GVRString(r.Resource) }

// tenantLoad is a tenant's traffic through the plane's load balancer, with
// the tenant's own identity: CRUD on Apps and on Routes in its namespace,
// lists of the scheduler's ClusterCapacities, and lists of the skew
// resources. Workers with long-lived connections (as controllers and the
// dashboard hold) and one that opens a connection per request (as kubectl
// does) run paced until stopped. Every request is kept.
type tenantLoad struct {
	host string
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	requests []tenantRequest
}

// startTenantLoad starts the workers on the plane's load balancer. skew are
// the resources to list that only one side of the version skew serves.
func startTenantLoad(cp *controlplane.ControlPlane, skew []schema.GroupVersionResource) (*tenantLoad, error) {
	cfg, err := cp.UserConfig(tenantUser, tenantGroup)
	if err != nil {
		return nil, err
	}
	return startTenantLoadAt(cfg, skew, true)
}

// startTenantLoadAt starts the workers with cfg, the tenant's identity at a
// load balancer. scheduler adds the worker that lists the scheduler's
// ClusterCapacities (the aggregated API must be registered there).
func startTenantLoadAt(cfg *rest.Config, skew []schema.GroupVersionResource, scheduler bool) (*tenantLoad, error) {
	l := &tenantLoad{host: strings.TrimSuffix(cfg.Host, "/"), stop: make(chan struct{})}
	// A Dial of its own gives each long-lived client its own transport, and
	// so its own connection through the load balancer (client-go shares
	// transports between equal configs).
	longLived := func() (*http.Client, error) {
		c := rest.CopyConfig(cfg)
		c.Dial = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
		return rest.HTTPClientFor(c)
	}
	apps, err := longLived()
	if err != nil {
		return nil, err
	}
	routes, err := longLived()
	if err != nil {
		return nil, err
	}
	sched, err := longLived()
	if err != nil {
		return nil, err
	}
	skewLong, err := longLived()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	perRequest := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}, Timeout: 10 * time.Second}

	l.crud("apps", apps, appsGVR, func(name string) map[string]any {
		return map[string]any{"suspended": true}
	})
	l.crud("routes", routes, routesGVR, func(name string) map[string]any {
		return map[string]any{"hostname": name + ".acme.example.com", "appRef": map[string]any{"name": "web"}}
	})
	if scheduler {
		l.loop("scheduler", 100*time.Millisecond, func(ctx context.Context, i int) {
			l.do(ctx, "scheduler", sched, http.MethodGet, verify.VerbList, clusterCapacities, mvp.ListPath(clusterCapacities), nil, false)
		})
	}
	if len(skew) > 0 {
		l.loop("skew", 50*time.Millisecond, func(ctx context.Context, i int) {
			gvr := skew[i%len(skew)]
			l.do(ctx, "skew", skewLong, http.MethodGet, verify.VerbList, gvr, mvp.ListPath(gvr)+"?limit=5", nil, true)
		})
		l.loop("kubectl", 50*time.Millisecond, func(ctx context.Context, i int) {
			gvr := skew[i%len(skew)]
			l.do(ctx, "kubectl", perRequest, http.MethodGet, verify.VerbList, gvr, mvp.ListPath(gvr)+"?limit=5", nil, true)
		})
	}
	return l, nil
}

// crud runs create, get, update, list and delete of one object after the
// other, a new object each round.
func (l *tenantLoad) crud(worker string, client *http.Client, gvr schema.GroupVersionResource, spec func(name string) map[string]any) {
	kind := map[string]string{"apps": "App", "routes": "Route"}[gvr.Resource]
	l.loop(worker, 100*time.Millisecond, func(ctx context.Context, i int) {
		name := fmt.Sprintf("load-%d", i/5)
		switch i % 5 {
		case 0:
			body, _ := json.Marshal(map[string]any{
				"apiVersion": gvr.GroupVersion().String(), "kind": kind,
				"metadata": map[string]any{"name": name}, "spec": spec(name),
			})
			l.do(ctx, worker, client, http.MethodPost, verify.VerbCreate, gvr, mvp.Path(gvr, tenantNamespace, ""), body, false)
		case 1:
			l.do(ctx, worker, client, http.MethodGet, verify.VerbGet, gvr, mvp.Path(gvr, tenantNamespace, name), nil, false)
		case 2:
			body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"round": fmt.Sprint(i / 5)}}})
			l.do(ctx, worker, client, http.MethodPatch, "update", gvr, mvp.Path(gvr, tenantNamespace, name), body, false)
		case 3:
			l.do(ctx, worker, client, http.MethodGet, verify.VerbList, gvr, mvp.Path(gvr, tenantNamespace, "")+"?limit=20", nil, false)
		case 4:
			l.do(ctx, worker, client, http.MethodDelete, verify.VerbDelete, gvr, mvp.Path(gvr, tenantNamespace, name), nil, false)
		}
	})
}

// loop calls request every interval until the load stops.
func (l *tenantLoad) loop(worker string, interval time.Duration, request func(ctx context.Context, i int)) {
	l.wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			request(ctx, i)
			cancel()
		}
	})
}

func (l *tenantLoad) do(ctx context.Context, worker string, client *http.Client, method, verb string, gvr schema.GroupVersionResource, path string, body []byte, skew bool) {
	r := tenantRequest{At: time.Now(), Worker: worker, Verb: verb, Resource: gvr, Skew: skew}
	contentType := ""
	if body != nil {
		contentType = "application/json"
		if method == http.MethodPatch {
			contentType = "application/merge-patch+json"
		}
	}
	var status int
	var answer []byte
	var err error
	for {
		var header http.Header
		status, answer, header, err = sendWithHeader(ctx, client, l.host, method, path, contentType, body)
		wait, again := retryLikeClientGo(method, status, header, err, r.Retries)
		if !again {
			break
		}
		r.Retries++
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	r.Duration = time.Since(r.At)
	r.Status = status
	switch {
	case err != nil:
		r.Message = err.Error()
	case status < 200 || status >= 300:
		r.Message = verify.Evidence(answer)
	}
	l.mu.Lock()
	l.requests = append(l.requests, r)
	l.mu.Unlock()
}

// halt stops the workers and waits for them.
func (l *tenantLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// snapshot returns the requests so far.
func (l *tenantLoad) snapshot() []tenantRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]tenantRequest(nil), l.requests...)
}

// retryLikeClientGo says whether client-go (and so kubectl and every
// controller) would retry an answer transparently, and after how long: a
// 429 or 5xx with Retry-After (what an apiserver with
// --shutdown-send-retry-after answers while it shuts down, and what
// priority and fairness answers), and a GET whose connection broke before an
// answer — at most 10 times, as client-go's default.
func retryLikeClientGo(method string, status int, header http.Header, err error, retries int) (time.Duration, bool) {
	if retries >= 10 {
		return 0, false
	}
	if err != nil {
		msg := err.Error()
		probableEOF := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "connection reset by peer") ||
			strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "server sent GOAWAY")
		return 100 * time.Millisecond, method == http.MethodGet && probableEOF
	}
	if status != http.StatusTooManyRequests && status < 500 {
		return 0, false
	}
	secs, perr := strconv.Atoi(header.Get("Retry-After"))
	if perr != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// send sends one request and returns the status and the start of the body.
func send(ctx context.Context, client *http.Client, host, method, path, contentType string, body []byte) (int, []byte, error) {
	status, answer, _, err := sendWithHeader(ctx, client, host, method, path, contentType, body)
	return status, answer, err
}

// sendWithHeader is send that also returns the answer's header.
func sendWithHeader(ctx context.Context, client *http.Client, host, method, path, contentType string, body []byte) (int, []byte, http.Header, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, host+path, r)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	return resp.StatusCode, answer, resp.Header, nil
}
