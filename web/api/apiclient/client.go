package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Error is an error answer of the API.
type Error struct {
	// Status is the HTTP status code.
	Status int
	ErrorBody
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (field %s)", e.Message, e.Field)
	}
	return e.Message
}

// IsStatus reports whether err is an API error answer with the given HTTP
// status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// Client calls the platform API. It is safe for concurrent use.
type Client struct {
	base  string // the API's root URL, without a trailing slash
	token string
	http  *http.Client
}

// New returns a client of the API at baseURL (such as
// http://127.0.0.1:8080; a trailing /api/v1 is accepted) that authenticates
// with token. A nil httpClient means http.DefaultClient. Streams (followed
// logs) end when their context does, so httpClient should have no overall
// timeout.
func New(baseURL, token string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("API URL %q: want http:// or https:// and a host", baseURL)
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	base := strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), "/api/v1")
	return &Client{base: base, token: token, http: httpClient}, nil
}

// BaseURL returns the API's root URL.
func (c *Client) BaseURL() string { return c.base }

// do sends a request to /api/v1+path with body (JSON-encoded unless nil)
// and returns the response when its status is 2xx; otherwise it returns an
// *Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding request: %w", err)
		}
		r = bytes.NewReader(b)
	}
	u := c.base + "/api/v1" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling the API at %s: %w", c.base, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, errorOf(resp)
}

// errorOf reads an error answer into an *Error.
func errorOf(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e.ErrorBody) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(fmt.Sprintf("%s %s", resp.Status, b))
	}
	return e
}

// call is do that decodes a JSON answer into out, unless out is nil.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding the answer to %s %s: %w", method, path, err)
	}
	return nil
}

func seg(s string) string { return url.PathEscape(s) }

// WhoAmI returns whom the token acts for.
func (c *Client) WhoAmI(ctx context.Context) (WhoAmI, error) {
	var w WhoAmI
	return w, c.call(ctx, http.MethodGet, "/whoami", nil, nil, &w)
}

// CreateSession makes a session token from the client's token.
func (c *Client) CreateSession(ctx context.Context, req CreateSessionRequest) (Session, error) {
	var s Session
	return s, c.call(ctx, http.MethodPost, "/sessions", nil, req, &s)
}

// EndSession revokes the client's token, which must be a session token.
func (c *Client) EndSession(ctx context.Context) error {
	return c.call(ctx, http.MethodDelete, "/sessions/current", nil, nil, nil)
}

// CreateTenant creates a tenant and its first token (operator tokens only).
func (c *Client) CreateTenant(ctx context.Context, name string) (CreatedTenant, error) {
	var t CreatedTenant
	return t, c.call(ctx, http.MethodPost, "/admin/tenants", nil, CreateTenantRequest{Name: name}, &t)
}

// ListTenants lists the tenants (operator tokens only).
func (c *Client) ListTenants(ctx context.Context) ([]Tenant, error) {
	var ts []Tenant
	return ts, c.call(ctx, http.MethodGet, "/admin/tenants", nil, nil, &ts)
}

// Quota returns the caller's tenant's quotas and usage.
func (c *Client) Quota(ctx context.Context) (Quota, error) {
	var q Quota
	return q, c.call(ctx, http.MethodGet, "/quota", nil, nil, &q)
}

// TenantQuota returns a tenant's quotas and usage (operator tokens only).
func (c *Client) TenantQuota(ctx context.Context, tenant string) (Quota, error) {
	var q Quota
	return q, c.call(ctx, http.MethodGet, "/admin/tenants/"+url.PathEscape(tenant)+"/quota", nil, nil, &q)
}

// TenantMembers returns a tenant's members by email, with their roles and
// when they joined (operator tokens only).
func (c *Client) TenantMembers(ctx context.Context, tenant string) ([]Member, error) {
	var ms []Member
	return ms, c.call(ctx, http.MethodGet, "/admin/tenants/"+url.PathEscape(tenant)+"/members", nil, nil, &ms)
}

// InviteToTenant invites an email into a tenant with a role, as its
// admins do with Invite; the answer holds the invitation's code (operator
// tokens only).
func (c *Client) InviteToTenant(ctx context.Context, tenant string, req InviteRequest) (Invitation, error) {
	var inv Invitation
	return inv, c.call(ctx, http.MethodPost, "/admin/tenants/"+url.PathEscape(tenant)+"/members", nil, req, &inv)
}

// TenantInvitations returns a tenant's pending invitations (operator
// tokens only).
func (c *Client) TenantInvitations(ctx context.Context, tenant string) ([]Invitation, error) {
	var invs []Invitation
	return invs, c.call(ctx, http.MethodGet, "/admin/tenants/"+url.PathEscape(tenant)+"/invitations", nil, nil, &invs)
}

// RevokeTenantInvitation revokes a tenant's pending invitation by its ID
// (operator tokens only).
func (c *Client) RevokeTenantInvitation(ctx context.Context, tenant, id string) error {
	return c.call(ctx, http.MethodDelete, "/admin/tenants/"+url.PathEscape(tenant)+"/invitations/"+seg(id), nil, nil, nil)
}

// SetTenantMemberRole gives a tenant's member another role (operator
// tokens only).
func (c *Client) SetTenantMemberRole(ctx context.Context, tenant, email, role string) (Member, error) {
	var m Member
	return m, c.call(ctx, http.MethodPatch, "/admin/tenants/"+url.PathEscape(tenant)+"/members/"+seg(email), nil, SetRoleRequest{Role: role}, &m)
}

// RemoveTenantMember removes a tenant's member (operator tokens only).
func (c *Client) RemoveTenantMember(ctx context.Context, tenant, email string) error {
	return c.call(ctx, http.MethodDelete, "/admin/tenants/"+url.PathEscape(tenant)+"/members/"+seg(email), nil, nil, nil)
}

// SetTenantQuota replaces the quotas the operator set for a tenant; a nil
// field is the platform's default (operator tokens only).
func (c *Client) SetTenantQuota(ctx context.Context, tenant string, o QuotaOverrides) (Quota, error) {
	var q Quota
	return q, c.call(ctx, http.MethodPut, "/admin/tenants/"+url.PathEscape(tenant)+"/quota", nil, o, &q)
}

// PatchTenantQuota changes only the quotas p names for a tenant: the
// others keep what they have, whoever set them meanwhile (operator tokens
// only). With expectations (QuotaPatch.Expect) that no longer hold, it
// changes nothing and the error is an *Error with status 409 and
// Conflicts.
func (c *Client) PatchTenantQuota(ctx context.Context, tenant string, p QuotaPatch) (Quota, error) {
	var q Quota
	return q, c.call(ctx, http.MethodPatch, "/admin/tenants/"+url.PathEscape(tenant)+"/quota", nil, p, &q)
}

// ListAudit lists audit entries, newest first (operator tokens only).
func (c *Client) ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	v := url.Values{}
	for k, s := range map[string]string{"tenant": q.Tenant, "actor": q.Actor, "action": q.Action, "since": q.Since} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Before > 0 {
		v.Set("before", strconv.FormatInt(q.Before, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out []AuditEntry
	return out, c.call(ctx, http.MethodGet, "/admin/audit", v, nil, &out)
}

// CreateApp creates an app.
func (c *Client) CreateApp(ctx context.Context, req CreateAppRequest) (App, error) {
	var a App
	return a, c.call(ctx, http.MethodPost, "/apps", nil, req, &a)
}

// ListApps lists the tenant's apps by name.
func (c *Client) ListApps(ctx context.Context) ([]App, error) {
	var as []App
	return as, c.call(ctx, http.MethodGet, "/apps", nil, nil, &as)
}

// GetApp returns an app.
func (c *Client) GetApp(ctx context.Context, name string) (App, error) {
	var a App
	return a, c.call(ctx, http.MethodGet, "/apps/"+seg(name), nil, nil, &a)
}

// DeleteApp deletes an app.
func (c *Client) DeleteApp(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/apps/"+seg(name), nil, nil, nil)
}

// ListBuilds lists the builds of app, or of every app when app is empty,
// newest first.
func (c *Client) ListBuilds(ctx context.Context, app string) ([]Build, error) {
	var bs []Build
	path := "/builds"
	if app != "" {
		path = "/apps/" + seg(app) + "/builds"
	}
	return bs, c.call(ctx, http.MethodGet, path, nil, nil, &bs)
}

// GetBuild returns build number of app; 0 means the latest.
func (c *Client) GetBuild(ctx context.Context, app string, number int) (Build, error) {
	var b Build
	return b, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/builds/"+buildRef(number), nil, nil, &b)
}

func buildRef(number int) string {
	if number == 0 {
		return "latest"
	}
	return strconv.Itoa(number)
}

// BuildLog copies the log of build number of app (0: the latest) to w. With
// follow it keeps copying lines as the build prints them, until the build
// ends or ctx does.
func (c *Client) BuildLog(ctx context.Context, app string, number int, follow bool, w io.Writer) error {
	q := url.Values{}
	if follow {
		q.Set("follow", "true")
	}
	resp, err := c.do(ctx, http.MethodGet, "/apps/"+seg(app)+"/builds/"+buildRef(number)+"/log", q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading the build log: %w", err)
	}
	return nil
}

// ListReleases lists the releases of app, newest first; with kinds (the
// ReleaseKind constants) only those of these kinds. The server refuses an
// unknown kind (422 on kind).
func (c *Client) ListReleases(ctx context.Context, app string, kinds ...string) ([]Release, error) {
	return c.ListReleasesPage(ctx, app, ReleasePage{Kinds: kinds})
}

// ReleasePage says which releases ListReleasesPage lists.
type ReleasePage struct {
	// Kinds are the kinds listed (the ReleaseKind constants); none: all.
	Kinds []string
	// Statuses are the statuses listed (ReleaseStatusFilters); none: all.
	Statuses []string
	// Before lists the releases numbered below it (0: the newest): the
	// last release of the page read before.
	Before int
	// Limit is how many at most (0: the server's default, 50; at most
	// 1000).
	Limit int
}

// ReleaseSucceeded is the status a release list is filtered by
// (ReleasePage.Statuses) for the releases that went out: those whose
// Release.Status is current, superseded or pruned.
const ReleaseSucceeded = "succeeded"

// ReleaseStatusFilters are the statuses a release list is filtered by:
// ReleaseSucceeded and ReleaseFailed. The server refuses any other (422
// on status).
func ReleaseStatusFilters() []string { return []string{ReleaseSucceeded, ReleaseFailed} }

// ParseReleaseNumber reads a release as bex releases names it, "v3" or
// "3" in any case; ok is false for anything else, 0 and below among it.
func ParseReleaseNumber(s string) (n int, ok bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(s), "v"))
	return n, err == nil && n >= 1
}

// OlderReleases returns where the page after rs starts, its last
// release's number (ReleasePage.Before of the next page), when rs is a
// full page of limit releases that has older ones; 0 when it has none.
func OlderReleases(rs []Release, limit int) int {
	if len(rs) == 0 || len(rs) != limit || rs[len(rs)-1].Number <= 1 {
		return 0
	}
	return rs[len(rs)-1].Number
}

// ListReleasesPage lists the releases of app page says, newest first.
func (c *Client) ListReleasesPage(ctx context.Context, app string, page ReleasePage) ([]Release, error) {
	q := url.Values{}
	if len(page.Kinds) > 0 {
		q.Set("kind", strings.Join(page.Kinds, ","))
	}
	if len(page.Statuses) > 0 {
		q.Set("status", strings.Join(page.Statuses, ","))
	}
	if page.Before > 0 {
		q.Set("before", strconv.Itoa(page.Before))
	}
	if page.Limit > 0 {
		q.Set("limit", strconv.Itoa(page.Limit))
	}
	var rs []Release
	return rs, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/releases", q, nil, &rs)
}

// Rollback rolls app back to release to; 0 means the one before the
// current.
func (c *Client) Rollback(ctx context.Context, app string, to int) (Rollback, error) {
	var r Rollback
	return r, c.call(ctx, http.MethodPost, "/apps/"+seg(app)+"/rollback", nil, RollbackRequest{Release: to}, &r)
}

// ListEnv lists the environment of app by name.
func (c *Client) ListEnv(ctx context.Context, app string) ([]EnvVar, error) {
	var vs []EnvVar
	return vs, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/env", nil, nil, &vs)
}

// PatchEnv sets and unsets variables of app and returns its environment
// and the release that rolled the change out (ReleaseHeader), 0 when none
// did: the app has no release yet, or req.NoRelease.
func (c *Client) PatchEnv(ctx context.Context, app string, req PatchEnvRequest) ([]EnvVar, int, error) {
	path := "/apps/" + seg(app) + "/env"
	resp, err := c.do(ctx, http.MethodPatch, path, nil, req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var vs []EnvVar
	if err := json.NewDecoder(resp.Body).Decode(&vs); err != nil {
		return nil, 0, fmt.Errorf("decoding the answer to %s %s: %w", http.MethodPatch, path, err)
	}
	release := 0
	if h := resp.Header.Get(ReleaseHeader); h != "" {
		if release, err = strconv.Atoi(h); err != nil {
			return nil, 0, fmt.Errorf("the answer to %s %s: %s %q is not a release number", http.MethodPatch, path, ReleaseHeader, h)
		}
	}
	return vs, release, nil
}

// UpdateApp changes app's settings and returns the app as it is then.
func (c *Client) UpdateApp(ctx context.Context, app string, req UpdateAppRequest) (App, error) {
	var a App
	return a, c.call(ctx, http.MethodPatch, "/apps/"+seg(app), nil, req, &a)
}

// Scale sets how many instances of each process app runs and, when plan
// is not empty, its plan, and applies them to its current release.
func (c *Client) Scale(ctx context.Context, app string, processes map[string]int, plan string) (Scale, error) {
	var r Scale
	return r, c.call(ctx, http.MethodPost, "/apps/"+seg(app)+"/scale", nil, ScaleRequest{Processes: processes, Plan: plan}, &r)
}

// Restart restarts the instances of app's current release: of process, or
// of every process when it is "".
func (c *Client) Restart(ctx context.Context, app, process string) (Restart, error) {
	var r Restart
	return r, c.call(ctx, http.MethodPost, "/apps/"+seg(app)+"/restart", nil, RestartRequest{Process: process}, &r)
}

// Logs calls fn with the app's log lines: the last tail lines (0: the
// API's default), and with follow the new ones as they come, until ctx
// ends. It returns fn's error if fn fails.
func (c *Client) Logs(ctx context.Context, app string, tail int, follow bool, fn func(LogLine) error) error {
	q := url.Values{}
	if follow {
		q.Set("follow", "true")
	}
	if tail > 0 {
		q.Set("tail", strconv.Itoa(tail))
	}
	resp, err := c.do(ctx, http.MethodGet, "/apps/"+seg(app)+"/logs", q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l LogLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("decoding a log line: %w", err)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading logs: %w", err)
	}
	return nil
}

// ListSSHKeys lists the tenant's SSH keys.
func (c *Client) ListSSHKeys(ctx context.Context) ([]SSHKey, error) {
	var ks []SSHKey
	return ks, c.call(ctx, http.MethodGet, "/ssh-keys", nil, nil, &ks)
}

// AddSSHKey registers an SSH key.
func (c *Client) AddSSHKey(ctx context.Context, req AddSSHKeyRequest) (SSHKey, error) {
	var k SSHKey
	return k, c.call(ctx, http.MethodPost, "/ssh-keys", nil, req, &k)
}

// DeleteSSHKey removes the SSH key with the given ID.
func (c *Client) DeleteSSHKey(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/ssh-keys/"+seg(id), nil, nil, nil)
}

// AddRoute adds a custom hostname to app.
func (c *Client) AddRoute(ctx context.Context, app string, req AddRouteRequest) (Route, error) {
	var r Route
	return r, c.call(ctx, http.MethodPost, "/apps/"+seg(app)+"/routes", nil, req, &r)
}

// ListRoutes lists app's routes by hostname and path prefix.
func (c *Client) ListRoutes(ctx context.Context, app string) ([]Route, error) {
	var rs []Route
	return rs, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/routes", nil, nil, &rs)
}

// RemoveRoute removes app's route for hostname and pathPrefix ("" means
// "/").
func (c *Client) RemoveRoute(ctx context.Context, app, hostname, pathPrefix string) error {
	q := url.Values{}
	if pathPrefix != "" {
		q.Set("pathPrefix", pathPrefix)
	}
	return c.call(ctx, http.MethodDelete, "/apps/"+seg(app)+"/routes/"+seg(hostname), q, nil, nil)
}
