package mvp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Server is one apiserver, reached directly (never through a load
// balancer).
type Server struct {
	// Name names the server in errors: its hostname, or its address.
	Name string
	// Config points at this server only.
	Config *rest.Config
}

// Defaults of PeerSyncOptions.
const (
	DefaultPeerSyncTimeout  = time.Minute
	DefaultPeerSyncInterval = 100 * time.Millisecond
)

// PeerSyncOptions bound WaitListedByPeers.
type PeerSyncOptions struct {
	// Timeout bounds the wait. Zero means DefaultPeerSyncTimeout.
	Timeout time.Duration
	// Interval is the time between two reads of the discovery documents.
	// Zero means DefaultPeerSyncInterval.
	Interval time.Duration
}

// UnlistedByPeers reads what server serves itself (its nopeer discovery)
// and each peer's peer-merged discovery, and returns, by peer name, the
// resources of server that the peer's merged view lacks. A peer that lists
// them all is left out, so an empty map means every peer would answer a
// request for any of server's resources (itself, or by proxying it to
// server). It fails when a document cannot be read.
func UnlistedByPeers(ctx context.Context, server Server, peers []Server) (map[string][]schema.GroupVersionResource, error) {
	own, err := Discovery(ctx, server.Config, true)
	if err != nil {
		return nil, fmt.Errorf("reading the local discovery of %s: %w", server.Name, err)
	}
	out := map[string][]schema.GroupVersionResource{}
	var errs []error
	for _, p := range peers {
		merged, err := Discovery(ctx, p.Config, false)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the merged discovery of %s: %w", p.Name, err))
			continue
		}
		if missing := own.Minus(merged); len(missing) > 0 {
			out[p.Name] = missing
		}
	}
	return out, errors.Join(errs...)
}

// WaitListedByPeers waits until the peer-merged discovery of every peer
// lists everything server serves itself (see UnlistedByPeers), and returns
// how long that took.
//
// It is the admission gate of a new apiserver on a control plane whose
// servers run the Mixed Version Proxy: an older peer answers 404 for a
// resource only the new server serves until its peer discovery has synced
// with the new server, which kube-apiserver retries only after the new
// server is ready. Put the new server behind the control plane's load
// balancer once this returns nil, and requests for its resources reaching an
// older peer are proxied instead of answered 404.
//
// Peers must run the proxy (--peer-ca-file set, and on 1.35 the
// UnknownVersionInteroperabilityProxy gate on): the merged discovery of a
// peer without it never lists another server's resources, and the wait
// times out. Leave such peers out; they answer 404 for what they do not
// serve whatever the new server does. With no peer it returns at once.
//
// On timeout or when ctx ends it returns a *NotListedError naming server,
// each peer and what its merged view still lacks.
func WaitListedByPeers(ctx context.Context, server Server, peers []Server, opts PeerSyncOptions) (time.Duration, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultPeerSyncTimeout
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultPeerSyncInterval
	}
	start := time.Now()
	if len(peers) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	for {
		missing, err := UnlistedByPeers(ctx, server, peers)
		if err == nil && len(missing) == 0 {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), &NotListedError{Server: server.Name, Waited: time.Since(start), Missing: missing, Err: err, Cause: ctx.Err()}
		case <-tick.C:
		}
	}
}

// NotListedError is WaitListedByPeers' error: the peers that still do not
// list what the server serves when the wait ended.
type NotListedError struct {
	// Server is the name of the server waited for.
	Server string
	// Waited is how long it waited.
	Waited time.Duration
	// Missing maps a peer's name to the server's resources its merged
	// discovery lacked at the last read.
	Missing map[string][]schema.GroupVersionResource
	// Err is why the last read failed, if it did.
	Err error
	// Cause is why the wait ended: context.DeadlineExceeded on timeout.
	Cause error
}

func (e *NotListedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiserver %s is not listed by its peers after %s", e.Server, e.Waited.Round(100*time.Millisecond))
	peers := make([]string, 0, len(e.Missing))
	for p := range e.Missing {
		peers = append(peers, p)
	}
	slices.Sort(peers)
	for i, p := range peers {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%sthe peer-merged discovery of %s lacks %d of its resources (%s)", sep, p, len(e.Missing[p]), GVRList(e.Missing[p], 3))
	}
	if len(peers) > 0 {
		b.WriteString("; the peers' MVP is not wired, or their peer discovery has not synced with it")
	}
	if e.Err != nil {
		fmt.Fprintf(&b, "; last read: %v", e.Err)
	}
	return b.String()
}

// Unwrap returns why the wait ended and why the last read failed.
func (e *NotListedError) Unwrap() []error {
	var out []error
	for _, err := range []error{e.Cause, e.Err} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// GVRString writes a resource as group/version/resource, or
// version/resource in the core group.
func GVRString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Version + "/" + gvr.Resource
	}
	return gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
}

// GVRList names up to n resources (see GVRString), and how many more there
// are.
func GVRList(g []schema.GroupVersionResource, n int) string {
	var names []string
	for i, x := range g {
		if i == n {
			names = append(names, fmt.Sprintf("and %d more", len(g)-n))
			break
		}
		names = append(names, GVRString(x))
	}
	return strings.Join(names, ", ")
}
