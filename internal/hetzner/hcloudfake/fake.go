package hcloudfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	"k8s.io/apimachinery/pkg/labels"
)

// Token is the API token the fake accepts; Client sets it.
const Token = "hcloudfake-token"

// Target health statuses, as the API spells them.
const (
	HealthUnknown   = "unknown"
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// EventKind names a change in the fake's state.
type EventKind string

// The event kinds.
const (
	EventTargetAdded    EventKind = "TargetAdded"
	EventTargetRemoved  EventKind = "TargetRemoved"
	EventServerDeleted  EventKind = "ServerDeleted"
	EventActionFinished EventKind = "ActionFinished"
)

// Event is one change, in the order the fake made them.
type Event struct {
	// Seq orders events; it starts at 1.
	Seq int
	// At is the fake's clock when the change happened.
	At   time.Time
	Kind EventKind
	// LoadBalancerID and ServerID are set when they apply.
	LoadBalancerID int64
	ServerID       int64
	ActionID       int64
	// Detail is free text: the action's command and status, or the load
	// balancers a deleted server was still a target of.
	Detail string
}

// Options configures a Fake.
type Options struct {
	// Now is the fake's clock; nil means time.Now.
	Now func() time.Time
	// ActionRequests is how many later requests an action stays running
	// for; zero means 2, so a waiter sees it running at least once.
	ActionRequests int
}

// Fake is a stateful Hetzner Cloud API behind an httptest.Server. Create it
// with New and Close it when done.
type Fake struct {
	srv *httptest.Server

	mu             sync.Mutex
	now            func() time.Time
	actionRequests int
	nextID         int64
	seq            int
	locations      map[string]schema.Location
	serverTypes    map[string]*serverType
	servers        map[int64]*server
	lbs            map[int64]*loadBalancer
	actions        map[int64]*action
	events         []Event
	requests       []string
	rateLimited    int
	failures       []failure
	failNextAction *schema.ActionError
	health         map[int64][]string
}

type serverType struct {
	schema schema.ServerType
}

type server struct {
	schema schema.Server
}

type loadBalancer struct {
	schema  schema.LoadBalancer
	targets []*target
}

type target struct {
	serverID     int64
	usePrivateIP bool
	health       string
	script       []string
}

type action struct {
	schema    schema.Action
	remaining int
	lockLB    int64
	onSuccess func()
	scripted  *schema.ActionError
}

type failure struct {
	method, path string
	status       int
	code, msg    string
	// always keeps the failure after it answered (FailAlways).
	always bool
}

// New starts a fake.
func New(opts Options) *Fake {
	f := &Fake{
		now:            opts.Now,
		actionRequests: opts.ActionRequests,
		locations:      map[string]schema.Location{},
		serverTypes:    map[string]*serverType{},
		servers:        map[int64]*server{},
		lbs:            map[int64]*loadBalancer{},
		actions:        map[int64]*action{},
		health:         map[int64][]string{},
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.actionRequests <= 0 {
		f.actionRequests = 2
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL is the API endpoint, for hcloud.WithEndpoint.
func (f *Fake) URL() string { return f.srv.URL }

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// Client returns an hcloud client for the fake that retries and polls
// without waiting; opts are applied after those defaults.
func (f *Fake) Client(opts ...hcloud.ClientOption) *hcloud.Client {
	base := []hcloud.ClientOption{
		hcloud.WithEndpoint(f.URL()),
		hcloud.WithToken(Token),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(0), MaxRetries: 5}),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(0)}),
	}
	return hcloud.NewClient(append(base, opts...)...)
}

// ---- Seeding ----

// AddLocation adds a location such as "fsn1".
func (f *Fake) AddLocation(name, networkZone string) schema.Location {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := schema.Location{ID: f.id(), Name: name, Description: name, Country: "DE", City: name, NetworkZone: networkZone}
	f.locations[name] = l
	return l
}

// ServerTypeSpec seeds a server type.
type ServerTypeSpec struct {
	Name         string
	Cores        int
	Memory       float32
	Disk         int
	Architecture string
	// Locations maps a location name to whether the type is available
	// there; each location must have been added.
	Locations map[string]bool
	// PriceHourly and PriceMonthly are net EUR amounts, the same in every
	// location.
	PriceHourly, PriceMonthly string
	// Deprecated marks the type deprecated in every location.
	Deprecated bool
}

// AddServerType adds a server type.
func (f *Fake) AddServerType(spec ServerTypeSpec) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := schema.ServerType{ID: f.id(), Name: spec.Name, Description: strings.ToUpper(spec.Name),
		Category: "shared", Cores: spec.Cores, Memory: spec.Memory, Disk: spec.Disk,
		StorageType: "local", CPUType: "shared", Architecture: spec.Architecture}
	if st.Architecture == "" {
		st.Architecture = "x86"
	}
	names := make([]string, 0, len(spec.Locations))
	for n := range spec.Locations {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		loc := f.locations[n]
		stl := schema.ServerTypeLocation{ID: loc.ID, Name: n, Available: spec.Locations[n], Recommended: spec.Locations[n]}
		if spec.Deprecated {
			stl.Deprecation = &schema.DeprecationInfo{Announced: f.now().Add(-24 * time.Hour), UnavailableAfter: f.now().Add(90 * 24 * time.Hour)}
		}
		st.Locations = append(st.Locations, stl)
		st.Prices = append(st.Prices, schema.PricingServerTypePrice{
			Location:     n,
			PriceHourly:  schema.Price{Net: spec.PriceHourly, Gross: spec.PriceHourly},
			PriceMonthly: schema.Price{Net: spec.PriceMonthly, Gross: spec.PriceMonthly},
		})
	}
	f.serverTypes[spec.Name] = &serverType{schema: st}
	return st.ID
}

// ServerSpec seeds a server.
type ServerSpec struct {
	Name       string
	Labels     map[string]string
	ServerType string
	Location   string
	IPv4       string
	PrivateIP  string
}

// AddServer adds a running server and returns its ID.
func (f *Fake) AddServer(spec ServerSpec) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := schema.Server{ID: f.id(), Name: spec.Name, Status: "running", Created: f.now(),
		Labels: copyLabels(spec.Labels), Location: f.locations[spec.Location],
		PublicNet: schema.ServerPublicNet{IPv4: schema.ServerPublicNetIPv4{IP: spec.IPv4}}}
	if st, ok := f.serverTypes[spec.ServerType]; ok {
		s.ServerType = st.schema
	} else {
		s.ServerType = schema.ServerType{Name: spec.ServerType}
	}
	if spec.PrivateIP != "" {
		s.PrivateNet = []schema.ServerPrivateNet{{Network: 1, IP: spec.PrivateIP}}
	}
	f.servers[s.ID] = &server{schema: s}
	return s.ID
}

// LoadBalancerSpec seeds a load balancer.
type LoadBalancerSpec struct {
	Name     string
	Labels   map[string]string
	Location string
	// ListenPorts are its TCP services (to the same destination port),
	// such as 6443.
	ListenPorts []int
	// Targets are server IDs, healthy from the start.
	Targets []int64
}

// AddLoadBalancer adds a load balancer and returns its ID.
func (f *Fake) AddLoadBalancer(spec LoadBalancerSpec) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	lb := &loadBalancer{schema: schema.LoadBalancer{ID: f.id(), Name: spec.Name, Labels: copyLabels(spec.Labels),
		Location: f.locations[spec.Location], Created: f.now(),
		LoadBalancerType: schema.LoadBalancerType{Name: "lb11"},
		Algorithm:        schema.LoadBalancerAlgorithm{Type: "round_robin"},
		PublicNet:        schema.LoadBalancerPublicNet{Enabled: true}}}
	for _, p := range spec.ListenPorts {
		lb.schema.Services = append(lb.schema.Services, schema.LoadBalancerService{Protocol: "tcp", ListenPort: p, DestinationPort: p,
			HealthCheck: &schema.LoadBalancerServiceHealthCheck{Protocol: "tcp", Port: p, Interval: 15, Timeout: 10, Retries: 3}})
	}
	for _, id := range spec.Targets {
		lb.targets = append(lb.targets, &target{serverID: id, health: HealthHealthy})
		if s, ok := f.servers[id]; ok {
			s.schema.LoadBalancers = append(s.schema.LoadBalancers, lb.schema.ID)
		}
	}
	f.lbs[lb.schema.ID] = lb
	return lb.schema.ID
}

// ---- Scripting ----

// RateLimit makes the next n requests fail with 429 rate_limit_exceeded.
func (f *Fake) RateLimit(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rateLimited = n
}

// FailNext makes the next request with method and path (such as
// "/load_balancers/3/actions/remove_target") fail with the status and the
// API error code and message.
func (f *Fake) FailNext(method, path string, status int, code, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, failure{method: method, path: path, status: status, code: code, msg: message})
}

// FailAlways makes every request with method and path fail as FailNext
// does, until ClearFailures: a project token without the permission, an
// outage.
func (f *Fake) FailAlways(method, path string, status int, code, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, failure{method: method, path: path, status: status, code: code, msg: message, always: true})
}

// ClearFailures drops the failures FailNext and FailAlways scripted and
// not yet answered.
func (f *Fake) ClearFailures() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = nil
}

// FailNextAction makes the next action the fake starts finish with status
// "error" and this code and message, without its effect.
func (f *Fake) FailNextAction(code, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNextAction = &schema.ActionError{Code: code, Message: message}
}

// LockLoadBalancer starts an unrelated action on the load balancer (as
// another client would) that runs for the next requests; the load balancer
// answers "locked" to target changes until it finishes. It returns the
// action's ID.
func (f *Fake) LockLoadBalancer(lbID int64, requests int) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.startAction("change_algorithm", lbID, "load_balancer", lbID, nil)
	a.remaining = requests
	return a.schema.ID
}

// ScriptHealth sets the health readings a new target of the server goes
// through, one per read of its load balancer, after "unknown"; the last one
// stays. Unscripted servers become "healthy" on the second read.
func (f *Fake) ScriptHealth(serverID int64, statuses ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.health[serverID] = append([]string(nil), statuses...)
}

// ---- Inspection ----

// Events returns the event log in order.
func (f *Fake) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event(nil), f.events...)
}

// Requests returns "METHOD /path" of every request received, in order.
func (f *Fake) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// Targets returns the server IDs targeted by the load balancer, sorted.
func (f *Fake) Targets(lbID int64) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	lb, ok := f.lbs[lbID]
	if !ok {
		return nil
	}
	var out []int64
	for _, t := range lb.targets {
		out = append(out, t.serverID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ServerExists reports whether the server exists.
func (f *Fake) ServerExists(id int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.servers[id]
	return ok
}

// ---- HTTP ----

type apiError struct {
	status    int
	code, msg string
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	f.tick()

	if r.Header.Get("Authorization") != "Bearer "+Token {
		writeError(w, apiError{http.StatusUnauthorized, "unauthorized", "unable to authenticate"})
		return
	}
	if f.rateLimited > 0 {
		f.rateLimited--
		w.Header().Set("RateLimit-Limit", "3600")
		w.Header().Set("RateLimit-Remaining", "0")
		w.Header().Set("RateLimit-Reset", strconv.FormatInt(f.now().Add(time.Second).Unix(), 10))
		writeError(w, apiError{http.StatusTooManyRequests, string(hcloud.ErrorCodeRateLimitExceeded), "limit of 3600 requests per hour reached"})
		return
	}
	for i, fl := range f.failures {
		if fl.method == r.Method && fl.path == r.URL.Path {
			if !fl.always {
				f.failures = append(f.failures[:i], f.failures[i+1:]...)
			}
			writeError(w, apiError{fl.status, fl.code, fl.msg})
			return
		}
	}

	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var body any
	var aerr *apiError
	switch {
	case r.Method == http.MethodGet && match(parts, "servers"):
		body, aerr = f.listServers(r)
	case r.Method == http.MethodGet && match(parts, "servers", "*"):
		body, aerr = f.getServer(parts[1])
	case r.Method == http.MethodDelete && match(parts, "servers", "*"):
		body, aerr = f.deleteServer(parts[1])
	case r.Method == http.MethodGet && match(parts, "load_balancers"):
		body, aerr = f.listLoadBalancers(r)
	case r.Method == http.MethodGet && match(parts, "load_balancers", "*"):
		body, aerr = f.getLoadBalancer(parts[1])
	case r.Method == http.MethodPost && match(parts, "load_balancers", "*", "actions", "add_target"):
		body, aerr = f.addTarget(parts[1], r)
	case r.Method == http.MethodPost && match(parts, "load_balancers", "*", "actions", "remove_target"):
		body, aerr = f.removeTarget(parts[1], r)
	case r.Method == http.MethodGet && match(parts, "actions"):
		body, aerr = f.listActions(r)
	case r.Method == http.MethodGet && match(parts, "actions", "*"):
		body, aerr = f.getAction(parts[1])
	case r.Method == http.MethodGet && match(parts, "server_types"):
		body, aerr = f.listServerTypes(r)
	case r.Method == http.MethodGet && match(parts, "server_types", "*"):
		body, aerr = f.getServerType(parts[1])
	case r.Method == http.MethodGet && match(parts, "locations"):
		body, aerr = f.listLocations(r)
	case r.Method == http.MethodGet && match(parts, "locations", "*"):
		body, aerr = f.getLocation(parts[1])
	default:
		aerr = &apiError{http.StatusNotFound, string(hcloud.ErrorCodeNotFound), "not found"}
	}
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		status = http.StatusCreated
	}
	writeJSON(w, status, body)
}

func match(parts []string, pattern ...string) bool {
	if len(parts) != len(pattern) {
		return false
	}
	for i, p := range pattern {
		if p != "*" && p != parts[i] {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeError(w http.ResponseWriter, e apiError) {
	writeJSON(w, e.status, schema.ErrorResponse{Error: schema.Error{Code: e.code, Message: e.msg}})
}

func notFound(kind string, id string) *apiError {
	return &apiError{http.StatusNotFound, string(hcloud.ErrorCodeNotFound), fmt.Sprintf("%s with ID %s not found", kind, id)}
}

func invalidInput(msg string) *apiError {
	return &apiError{http.StatusBadRequest, string(hcloud.ErrorCodeInvalidInput), msg}
}

// listResponse is the body of a list endpoint: the requested page of items
// under key, and the pagination meta object.
func listResponse[T any](r *http.Request, key string, items []T) any {
	page, meta := paginate(r, items)
	return map[string]any{key: nonNil(page), "meta": meta}
}

// paginate cuts items to the requested page and returns the meta object.
func paginate[T any](r *http.Request, items []T) ([]T, schema.Meta) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	perPage, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if page < 1 {
		page = 1
	}
	if perPage < 1 {
		perPage = 25
	}
	if perPage > 50 {
		perPage = 50
	}
	last := (len(items) + perPage - 1) / perPage
	if last == 0 {
		last = 1
	}
	start := min((page-1)*perPage, len(items))
	end := min(start+perPage, len(items))
	p := schema.MetaPagination{Page: page, PerPage: perPage, LastPage: last, TotalEntries: len(items)}
	if page > 1 {
		p.PreviousPage = page - 1
	}
	if page < last {
		p.NextPage = page + 1
	}
	return items[start:end], schema.Meta{Pagination: &p}
}

func filterLabels(r *http.Request, l map[string]string) (bool, *apiError) {
	raw := r.URL.Query().Get("label_selector")
	if raw == "" {
		return true, nil
	}
	sel, err := labels.Parse(raw)
	if err != nil {
		return false, invalidInput(fmt.Sprintf("invalid label_selector: %v", err))
	}
	return sel.Matches(labels.Set(l)), nil
}

// ---- servers ----

func (f *Fake) listServers(r *http.Request) (any, *apiError) {
	q := r.URL.Query()
	var out []schema.Server
	for _, id := range sortedKeys(f.servers) {
		s := f.servers[id].schema
		if n := q.Get("name"); n != "" && s.Name != n {
			continue
		}
		if st := q["status"]; len(st) > 0 && !contains(st, s.Status) {
			continue
		}
		ok, aerr := filterLabels(r, s.Labels)
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, s)
		}
	}
	return listResponse(r, "servers", out), nil
}

func (f *Fake) getServer(raw string) (any, *apiError) {
	id, _ := strconv.ParseInt(raw, 10, 64)
	s, ok := f.servers[id]
	if !ok {
		return nil, notFound("server", raw)
	}
	return schema.ServerGetResponse{Server: s.schema}, nil
}

func (f *Fake) deleteServer(raw string) (any, *apiError) {
	id, _ := strconv.ParseInt(raw, 10, 64)
	if _, ok := f.servers[id]; !ok {
		return nil, notFound("server", raw)
	}
	// Like the real API, deleting a server takes it out of every load
	// balancer; the event records which ones it was still in.
	var still []string
	for _, lbID := range sortedKeys(f.lbs) {
		lb := f.lbs[lbID]
		for i, t := range lb.targets {
			if t.serverID == id {
				lb.targets = append(lb.targets[:i], lb.targets[i+1:]...)
				still = append(still, strconv.FormatInt(lbID, 10))
				break
			}
		}
	}
	delete(f.servers, id)
	detail := "not a load balancer target"
	if len(still) > 0 {
		detail = "still a target of load balancers " + strings.Join(still, ",")
	}
	f.event(Event{Kind: EventServerDeleted, ServerID: id, Detail: detail})
	a := f.startAction("delete_server", 0, "server", id, nil)
	return schema.ServerDeleteResponse{Action: a.schema}, nil
}

// ---- load balancers ----

func (f *Fake) renderLB(lb *loadBalancer) schema.LoadBalancer {
	out := lb.schema
	out.Targets = nil
	for _, t := range lb.targets {
		st := schema.LoadBalancerTarget{Type: "server", Server: &schema.LoadBalancerTargetServer{ID: t.serverID}, UsePrivateIP: t.usePrivateIP}
		for _, svc := range lb.schema.Services {
			hs := schema.LoadBalancerTargetHealthStatus{ListenPort: svc.ListenPort, Status: t.health}
			if t.health == HealthUnhealthy {
				d := "layer4_no_connection"
				hs.Detail = &d
			}
			st.HealthStatus = append(st.HealthStatus, hs)
		}
		out.Targets = append(out.Targets, st)
	}
	if out.Targets == nil {
		out.Targets = []schema.LoadBalancerTarget{}
	}
	// Each read moves health checks on.
	for _, t := range lb.targets {
		t.advanceHealth()
	}
	return out
}

func (t *target) advanceHealth() {
	if len(t.script) == 0 {
		if t.health == HealthUnknown {
			t.health = HealthHealthy
		}
		return
	}
	t.health = t.script[0]
	if len(t.script) > 1 {
		t.script = t.script[1:]
	} else {
		t.script = []string{t.health}
	}
}

func (f *Fake) listLoadBalancers(r *http.Request) (any, *apiError) {
	var out []schema.LoadBalancer
	for _, id := range sortedKeys(f.lbs) {
		lb := f.lbs[id]
		if n := r.URL.Query().Get("name"); n != "" && lb.schema.Name != n {
			continue
		}
		ok, aerr := filterLabels(r, lb.schema.Labels)
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, f.renderLB(lb))
		}
	}
	return listResponse(r, "load_balancers", out), nil
}

func (f *Fake) getLoadBalancer(raw string) (any, *apiError) {
	id, _ := strconv.ParseInt(raw, 10, 64)
	lb, ok := f.lbs[id]
	if !ok {
		return nil, notFound("load_balancer", raw)
	}
	return schema.LoadBalancerGetResponse{LoadBalancer: f.renderLB(lb)}, nil
}

func (f *Fake) lockedBy(lbID int64) bool {
	for _, a := range f.actions {
		if a.lockLB == lbID && a.schema.Status == string(hcloud.ActionStatusRunning) {
			return true
		}
	}
	return false
}

// targetRequest is the body of add_target and remove_target.
type targetRequest struct {
	Type         string                           `json:"type"`
	Server       *schema.LoadBalancerTargetServer `json:"server"`
	UsePrivateIP *bool                            `json:"use_private_ip"`
}

func (f *Fake) targetAction(raw string, r *http.Request) (*loadBalancer, *targetRequest, *apiError) {
	id, _ := strconv.ParseInt(raw, 10, 64)
	lb, ok := f.lbs[id]
	if !ok {
		return nil, nil, notFound("load_balancer", raw)
	}
	var req targetRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, nil, &apiError{http.StatusBadRequest, string(hcloud.ErrorCodeJSONError), "invalid JSON"}
	}
	if req.Type != "server" || req.Server == nil {
		return nil, nil, invalidInput("only server targets are supported by this fake")
	}
	if f.lockedBy(id) {
		return nil, nil, &apiError{http.StatusLocked, string(hcloud.ErrorCodeLocked), "load balancer is locked by a running action"}
	}
	return lb, &req, nil
}

func (f *Fake) findTarget(lb *loadBalancer, serverID int64) int {
	for i, t := range lb.targets {
		if t.serverID == serverID {
			return i
		}
	}
	return -1
}

func (f *Fake) addTarget(raw string, r *http.Request) (any, *apiError) {
	lb, req, aerr := f.targetAction(raw, r)
	if aerr != nil {
		return nil, aerr
	}
	sid := req.Server.ID
	if _, ok := f.servers[sid]; !ok {
		return nil, notFound("server", strconv.FormatInt(sid, 10))
	}
	if f.findTarget(lb, sid) >= 0 {
		return nil, &apiError{http.StatusUnprocessableEntity, string(hcloud.ErrorCodeTargetAlreadyDefined), "the load balancer target you are trying to define is already defined"}
	}
	lbID := lb.schema.ID
	a := f.startAction("add_target", lbID, "load_balancer", lbID, func() {
		l, ok := f.lbs[lbID]
		if !ok || f.findTarget(l, sid) >= 0 {
			return
		}
		if _, ok := f.servers[sid]; !ok {
			return
		}
		t := &target{serverID: sid, health: HealthUnknown, script: f.health[sid]}
		if req.UsePrivateIP != nil {
			t.usePrivateIP = *req.UsePrivateIP
		}
		l.targets = append(l.targets, t)
		f.servers[sid].schema.LoadBalancers = append(f.servers[sid].schema.LoadBalancers, lbID)
		f.event(Event{Kind: EventTargetAdded, LoadBalancerID: lbID, ServerID: sid})
	})
	a.schema.Resources = append(a.schema.Resources, schema.ActionResourceReference{ID: sid, Type: "server"})
	return schema.LoadBalancerActionAddTargetResponse{Action: a.schema}, nil
}

func (f *Fake) removeTarget(raw string, r *http.Request) (any, *apiError) {
	lb, req, aerr := f.targetAction(raw, r)
	if aerr != nil {
		return nil, aerr
	}
	sid := req.Server.ID
	if f.findTarget(lb, sid) < 0 {
		return nil, &apiError{http.StatusNotFound, "load_balancer_target_not_found", "load balancer target not found"}
	}
	lbID := lb.schema.ID
	a := f.startAction("remove_target", lbID, "load_balancer", lbID, func() {
		l, ok := f.lbs[lbID]
		if !ok {
			return
		}
		if i := f.findTarget(l, sid); i >= 0 {
			l.targets = append(l.targets[:i], l.targets[i+1:]...)
		}
		if s, ok := f.servers[sid]; ok {
			var keep []int64
			for _, id := range s.schema.LoadBalancers {
				if id != lbID {
					keep = append(keep, id)
				}
			}
			s.schema.LoadBalancers = keep
		}
		f.event(Event{Kind: EventTargetRemoved, LoadBalancerID: lbID, ServerID: sid})
	})
	a.schema.Resources = append(a.schema.Resources, schema.ActionResourceReference{ID: sid, Type: "server"})
	return schema.LoadBalancerActionRemoveTargetResponse{Action: a.schema}, nil
}

// ---- actions ----

// startAction records a running action on a resource; lockLB (if not 0) is
// locked while it runs; onSuccess applies its effect when it finishes.
func (f *Fake) startAction(command string, lockLB int64, resType string, resID int64, onSuccess func()) *action {
	a := &action{
		schema: schema.Action{ID: f.id(), Status: string(hcloud.ActionStatusRunning), Command: command,
			Started: f.now(), Resources: []schema.ActionResourceReference{{ID: resID, Type: resType}}},
		remaining: f.actionRequests,
		lockLB:    lockLB,
		onSuccess: onSuccess,
		scripted:  f.failNextAction,
	}
	f.failNextAction = nil
	f.actions[a.schema.ID] = a
	return a
}

// tick moves every running action one request closer to its end.
func (f *Fake) tick() {
	for _, id := range sortedKeys(f.actions) {
		a := f.actions[id]
		if a.schema.Status != string(hcloud.ActionStatusRunning) {
			continue
		}
		a.remaining--
		a.schema.Progress = min(99, a.schema.Progress+50)
		if a.remaining > 0 {
			continue
		}
		now := f.now()
		a.schema.Finished = &now
		a.schema.Progress = 100
		if a.scripted != nil {
			a.schema.Status = string(hcloud.ActionStatusError)
			a.schema.Error = a.scripted
		} else {
			a.schema.Status = string(hcloud.ActionStatusSuccess)
			if a.onSuccess != nil {
				a.onSuccess()
			}
		}
		f.event(Event{Kind: EventActionFinished, ActionID: a.schema.ID, LoadBalancerID: a.lockLB,
			Detail: a.schema.Command + " " + a.schema.Status})
	}
}

func (f *Fake) listActions(r *http.Request) (any, *apiError) {
	ids := r.URL.Query()["id"]
	if len(ids) == 0 {
		return nil, invalidInput("id is required")
	}
	var out []schema.Action
	for _, raw := range ids {
		id, _ := strconv.ParseInt(raw, 10, 64)
		if a, ok := f.actions[id]; ok {
			out = append(out, a.schema)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return listResponse(r, "actions", out), nil
}

func (f *Fake) getAction(raw string) (any, *apiError) {
	id, _ := strconv.ParseInt(raw, 10, 64)
	a, ok := f.actions[id]
	if !ok {
		return nil, notFound("action", raw)
	}
	return schema.ActionGetResponse{Action: a.schema}, nil
}

// ---- server types and locations ----

func (f *Fake) listServerTypes(r *http.Request) (any, *apiError) {
	var out []schema.ServerType
	names := make([]string, 0, len(f.serverTypes))
	for n := range f.serverTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if q := r.URL.Query().Get("name"); q != "" && q != n {
			continue
		}
		out = append(out, f.serverTypes[n].schema)
	}
	return listResponse(r, "server_types", out), nil
}

func (f *Fake) getServerType(raw string) (any, *apiError) {
	id, _ := strconv.ParseInt(raw, 10, 64)
	for _, st := range f.serverTypes {
		if st.schema.ID == id {
			return schema.ServerTypeGetResponse{ServerType: st.schema}, nil
		}
	}
	return nil, notFound("server_type", raw)
}

func (f *Fake) listLocations(r *http.Request) (any, *apiError) {
	var out []schema.Location
	names := make([]string, 0, len(f.locations))
	for n := range f.locations {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if q := r.URL.Query().Get("name"); q != "" && q != n {
			continue
		}
		out = append(out, f.locations[n])
	}
	return listResponse(r, "locations", out), nil
}

func (f *Fake) getLocation(raw string) (any, *apiError) {
	id, _ := strconv.ParseInt(raw, 10, 64)
	for _, l := range f.locations {
		if l.ID == id {
			return schema.LocationGetResponse{Location: l}, nil
		}
	}
	return nil, notFound("location", raw)
}

// ---- helpers ----

func (f *Fake) id() int64 {
	f.nextID++
	return f.nextID
}

func (f *Fake) event(e Event) {
	f.seq++
	e.Seq = f.seq
	e.At = f.now()
	f.events = append(f.events, e)
}

func sortedKeys[V any](m map[int64]V) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

func copyLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
