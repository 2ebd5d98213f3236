package hetzner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// Defaults of HandoffOptions.
const (
	// DefaultDrainPeriod is how long RemoveServer waits after the target
	// left the load balancer, so requests already forwarded to it finish.
	DefaultDrainPeriod = 15 * time.Second
	// DefaultPollInterval is how often the hand-off re-reads a target's
	// health and retries a locked load balancer.
	DefaultPollInterval = 2 * time.Second
)

// ErrorCodeTargetNotFound is the API's code for removing a target the load
// balancer does not have; hcloud-go has no constant for it.
const ErrorCodeTargetNotFound hcloud.ErrorCode = "load_balancer_target_not_found"

// Errors the hand-off returns for things it looked for and did not find.
var (
	// ErrLoadBalancerNotFound: no load balancer has the configured ID or
	// name.
	ErrLoadBalancerNotFound = errors.New("load balancer not found")
	// ErrServerNotFound: no server matches the reference.
	ErrServerNotFound = errors.New("server not found")
	// ErrServerAmbiguous: more than one server matches the reference.
	ErrServerAmbiguous = errors.New("more than one server matches")
)

// HandoffOptions configures a LoadBalancerHandoff.
type HandoffOptions struct {
	// LoadBalancer is the ID or name of the cluster's API load balancer
	// (CAPH records it in HetznerCluster.status.controlPlaneLoadBalancer).
	LoadBalancer string
	// UsePrivateIP adds targets on their private network IP.
	UsePrivateIP bool
	// DrainPeriod is how long RemoveServer waits after the target left;
	// zero means DefaultDrainPeriod, negative means no wait.
	DrainPeriod time.Duration
	// PollInterval is how often health is re-read and a locked load
	// balancer retried; zero means DefaultPollInterval.
	PollInterval time.Duration
	// Wait blocks for d or until ctx ends, returning ctx's error then. Nil
	// means a timer; tests replace it to observe the drain and polls.
	Wait func(ctx context.Context, d time.Duration) error
}

// ServerRef names a control-plane server: by name (CAPH names the server
// after its HCloudMachine), by label selector, or both.
type ServerRef struct {
	Name          string
	LabelSelector string
}

func (r ServerRef) String() string {
	switch {
	case r.Name != "" && r.LabelSelector != "":
		return fmt.Sprintf("%q (%s)", r.Name, r.LabelSelector)
	case r.Name != "":
		return fmt.Sprintf("%q", r.Name)
	default:
		return fmt.Sprintf("with labels %q", r.LabelSelector)
	}
}

// HandoffResult says what a hand-off call found and did.
type HandoffResult struct {
	// ServerID and ServerName identify the server, when it was found.
	ServerID   int64
	ServerName string
	// ServerFound is false when RemoveServer found no server (already
	// deleted): there was nothing to remove.
	ServerFound bool
	// Changed is true when the call added or removed the target; false
	// when it was already in the wanted state.
	Changed bool
	// Drained is how long RemoveServer waited after the removal.
	Drained time.Duration
}

// LoadBalancerHandoff moves control-plane servers out of and into a
// cluster's API load balancer around Cluster API's machine replacement. Its
// methods are safe for concurrent use on different servers; two calls for
// the same server race like two API clients would.
type LoadBalancerHandoff struct {
	client *hcloud.Client
	opts   HandoffOptions
}

// NewLoadBalancerHandoff returns a hand-off for one load balancer.
func NewLoadBalancerHandoff(client *hcloud.Client, opts HandoffOptions) (*LoadBalancerHandoff, error) {
	if client == nil {
		return nil, errors.New("hetzner: no hcloud client")
	}
	if opts.LoadBalancer == "" {
		return nil, errors.New("hetzner: no load balancer ID or name")
	}
	if opts.DrainPeriod == 0 {
		opts.DrainPeriod = DefaultDrainPeriod
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Wait == nil {
		opts.Wait = wait
	}
	return &LoadBalancerHandoff{client: client, opts: opts}, nil
}

// RemoveServer takes the server out of the load balancer before its
// Machine is deleted: it removes the target, waits for the API's action to
// succeed, then waits the drain period. A server that is gone, or is not a
// target, is fine: nothing is changed and nothing drained. When it returns
// nil the server receives no new connections from the load balancer.
func (h *LoadBalancerHandoff) RemoveServer(ctx context.Context, ref ServerRef) (HandoffResult, error) {
	lb, err := h.loadBalancer(ctx)
	if err != nil {
		return HandoffResult{}, err
	}
	srv, err := h.server(ctx, ref)
	if errors.Is(err, ErrServerNotFound) {
		return HandoffResult{}, nil
	}
	if err != nil {
		return HandoffResult{}, err
	}
	res := HandoffResult{ServerID: srv.ID, ServerName: srv.Name, ServerFound: true}
	if targetOf(lb, srv.ID) == nil {
		return res, nil
	}
	action, err := h.retryLocked(ctx, func() (*hcloud.Action, error) {
		a, _, err := h.client.LoadBalancer.RemoveServerTarget(ctx, lb, srv)
		return a, err
	})
	if hcloud.IsError(err, ErrorCodeTargetNotFound) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("removing server %s (%d) from load balancer %s (%d): %w", srv.Name, srv.ID, lb.Name, lb.ID, err)
	}
	if err := h.client.Action.WaitFor(ctx, action); err != nil {
		return res, fmt.Errorf("waiting for action %d removing server %s from load balancer %s: %w", action.ID, srv.Name, lb.Name, err)
	}
	res.Changed = true
	if h.opts.DrainPeriod > 0 {
		if err := h.opts.Wait(ctx, h.opts.DrainPeriod); err != nil {
			return res, fmt.Errorf("draining server %s after leaving load balancer %s: %w", srv.Name, lb.Name, err)
		}
		res.Drained = h.opts.DrainPeriod
	}
	return res, nil
}

// AddServer puts a new control-plane server into the load balancer once its
// apiserver is healthy: it adds the target (a target already there is
// fine), waits for the action, then waits until the load balancer's health
// checks call the target healthy on every service port. Bound the wait with
// ctx; on timeout the error carries the last health seen.
func (h *LoadBalancerHandoff) AddServer(ctx context.Context, ref ServerRef) (HandoffResult, error) {
	lb, err := h.loadBalancer(ctx)
	if err != nil {
		return HandoffResult{}, err
	}
	srv, err := h.server(ctx, ref)
	if err != nil {
		return HandoffResult{}, err
	}
	res := HandoffResult{ServerID: srv.ID, ServerName: srv.Name, ServerFound: true}
	if targetOf(lb, srv.ID) == nil {
		action, err := h.retryLocked(ctx, func() (*hcloud.Action, error) {
			a, _, err := h.client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{
				Server: srv, UsePrivateIP: hcloud.Ptr(h.opts.UsePrivateIP)})
			return a, err
		})
		switch {
		case hcloud.IsError(err, hcloud.ErrorCodeTargetAlreadyDefined):
		case err != nil:
			return res, fmt.Errorf("adding server %s (%d) to load balancer %s (%d): %w", srv.Name, srv.ID, lb.Name, lb.ID, err)
		default:
			if err := h.client.Action.WaitFor(ctx, action); err != nil {
				return res, fmt.Errorf("waiting for action %d adding server %s to load balancer %s: %w", action.ID, srv.Name, lb.Name, err)
			}
			res.Changed = true
		}
	}
	if err := h.waitHealthy(ctx, lb, srv); err != nil {
		return res, err
	}
	return res, nil
}

// TargetHealth returns the server's health status per service port on the
// load balancer, or nil when it is not a target.
func (h *LoadBalancerHandoff) TargetHealth(ctx context.Context, ref ServerRef) ([]hcloud.LoadBalancerTargetHealthStatus, error) {
	lb, err := h.loadBalancer(ctx)
	if err != nil {
		return nil, err
	}
	srv, err := h.server(ctx, ref)
	if err != nil {
		return nil, err
	}
	if t := targetOf(lb, srv.ID); t != nil {
		return t.HealthStatus, nil
	}
	return nil, nil
}

func (h *LoadBalancerHandoff) waitHealthy(ctx context.Context, lb *hcloud.LoadBalancer, srv *hcloud.Server) error {
	for {
		cur, _, err := h.client.LoadBalancer.GetByID(ctx, lb.ID)
		if err != nil {
			return fmt.Errorf("reading load balancer %s for the health of server %s: %w", lb.Name, srv.Name, err)
		}
		if cur == nil {
			return fmt.Errorf("reading load balancer %s for the health of server %s: %w", lb.Name, srv.Name, ErrLoadBalancerNotFound)
		}
		t := targetOf(cur, srv.ID)
		if t == nil {
			return fmt.Errorf("waiting for server %s to be healthy: it is no longer a target of load balancer %s", srv.Name, lb.Name)
		}
		if healthy(t) {
			return nil
		}
		if err := h.opts.Wait(ctx, h.opts.PollInterval); err != nil {
			return fmt.Errorf("waiting for server %s to be healthy on load balancer %s (last: %s): %w", srv.Name, lb.Name, describeHealth(t), err)
		}
	}
}

// retryLocked calls do until the load balancer is no longer locked by
// another action (hcloud-go retries rate limits and conflicts itself).
func (h *LoadBalancerHandoff) retryLocked(ctx context.Context, do func() (*hcloud.Action, error)) (*hcloud.Action, error) {
	for {
		a, err := do()
		if !hcloud.IsError(err, hcloud.ErrorCodeLocked) {
			return a, err
		}
		if werr := h.opts.Wait(ctx, h.opts.PollInterval); werr != nil {
			return nil, fmt.Errorf("%w (%w)", err, werr)
		}
	}
}

func (h *LoadBalancerHandoff) loadBalancer(ctx context.Context) (*hcloud.LoadBalancer, error) {
	lb, _, err := h.client.LoadBalancer.Get(ctx, h.opts.LoadBalancer)
	if err != nil {
		return nil, fmt.Errorf("reading load balancer %s: %w", h.opts.LoadBalancer, err)
	}
	if lb == nil {
		return nil, fmt.Errorf("reading load balancer %s: %w", h.opts.LoadBalancer, ErrLoadBalancerNotFound)
	}
	return lb, nil
}

func (h *LoadBalancerHandoff) server(ctx context.Context, ref ServerRef) (*hcloud.Server, error) {
	if ref.Name == "" && ref.LabelSelector == "" {
		return nil, errors.New("finding server: neither name nor label selector given")
	}
	servers, err := h.client.Server.AllWithOpts(ctx, hcloud.ServerListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: ref.LabelSelector},
		Name:     ref.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("finding server %s: %w", ref, err)
	}
	switch len(servers) {
	case 0:
		return nil, fmt.Errorf("finding server %s: %w", ref, ErrServerNotFound)
	case 1:
		return servers[0], nil
	default:
		names := make([]string, 0, len(servers))
		for _, s := range servers {
			names = append(names, s.Name)
		}
		return nil, fmt.Errorf("finding server %s: %w: %s", ref, ErrServerAmbiguous, strings.Join(names, ", "))
	}
}

func targetOf(lb *hcloud.LoadBalancer, serverID int64) *hcloud.LoadBalancerTarget {
	for i := range lb.Targets {
		t := &lb.Targets[i]
		if t.Type == hcloud.LoadBalancerTargetTypeServer && t.Server != nil && t.Server.Server != nil && t.Server.Server.ID == serverID {
			return t
		}
	}
	return nil
}

// healthy is true when every service port reports the target healthy; a
// load balancer without services has no health checks to wait for.
func healthy(t *hcloud.LoadBalancerTarget) bool {
	for _, hs := range t.HealthStatus {
		if hs.Status != hcloud.LoadBalancerTargetHealthStatusStatusHealthy {
			return false
		}
	}
	return true
}

func describeHealth(t *hcloud.LoadBalancerTarget) string {
	if len(t.HealthStatus) == 0 {
		return "no health checks"
	}
	parts := make([]string, 0, len(t.HealthStatus))
	for _, hs := range t.HealthStatus {
		s := fmt.Sprintf("port %d %s", hs.ListenPort, hs.Status)
		if hs.Detail != nil {
			s += " " + string(*hs.Detail)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
