package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/deploy"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// bodyRoute is a route of the API that takes a JSON body and changes
// state, as FuzzAPIRequestBodies calls it.
type bodyRoute struct {
	method, path string
	operator     bool
	// fields are the request's top-level JSON fields: a 422 must name one.
	fields []string
}

// bodyRoutes are indexed by the fuzz input's first byte (modulo their
// number); the seed corpus names them by that index. Paths are those of the
// fuzz tenant and its app.
var bodyRoutes = []bodyRoute{
	{method: http.MethodPost, path: "/apps", fields: []string{"name", "branch"}},
	{method: http.MethodPatch, path: "/apps/" + fuzzApp + "/env", fields: []string{"set", "unset", "secret"}},
	{method: http.MethodPost, path: "/apps/" + fuzzApp + "/routes", fields: []string{"hostname", "pathPrefix", "tls"}},
	{method: http.MethodPost, path: "/ssh-keys", fields: []string{"name", "publicKey"}},
	{method: http.MethodPut, path: "/admin/tenants/" + fuzzTenant + "/quota", operator: true,
		fields: []string{"apps", "routes", "concurrentBuilds", "repoBytes", "buildMinutes"}},
	{method: http.MethodPost, path: "/admin/tenants", operator: true, fields: []string{"name"}},
	{method: http.MethodPost, path: "/apps/" + fuzzApp + "/rollback", fields: []string{"release"}},
	{method: http.MethodPost, path: "/tokens", fields: []string{"name", "scope", "expiresAt"}},
	{method: http.MethodPost, path: "/members", fields: []string{"email", "role"}},
	{method: http.MethodPatch, path: "/members/nobody@" + fuzzTenant + ".test", fields: []string{"role"}},
	{method: http.MethodPost, path: "/invitations/accept", fields: []string{"code", "tokenName"}},
}

// Framings of a body, by the fuzz input's second byte: its low two bits
// choose the Content-Type, the next two the encoding.
var (
	fuzzContentTypes = []string{"application/json", "", "text/plain; charset=utf-8", "application/x-www-form-urlencoded"}
	// fuzzEncodings: the body as it is; gzipped and saying so; as it is
	// but saying gzip; as it is but saying deflate.
	fuzzEncodings = []string{"", "gzip", "gzip-lie", "deflate-lie"}
)

const (
	fuzzTenant = "fz"
	fuzzApp    = "web"
)

// FuzzAPIRequestBodies sends arbitrary bodies, with the Content-Types and
// Content-Encodings clients send, to the API's routes that change state
// (apps, env, routes, SSH keys, rollback, tokens, members, invitations, and
// the operator's tenants and quotas), through the real handler on a real Postgres and a real
// kube-apiserver, one of each per fuzzing process, kept across inputs.
// Whatever the input: no panic and never a 5xx; an accepted body is one JSON
// value, in no encoding; a 4xx is a JSON error whose
// message says what is wrong, and a 422 names a field of the request; a
// body in an encoding the API does not decode is refused, naming the
// encoding; and a refused request changes nothing: no row of any table
// (but tokens' last use), no App, Route or Secret of the tenant, no
// namespace.
func FuzzAPIRequestBodies(f *testing.F) {
	env := &bodyFuzzEnv{databaseURL: pgtest.NewDatabase(f)}
	f.Cleanup(env.stop)
	f.Fuzz(func(t *testing.T, target, framing uint8, body []byte) {
		e := env.get(t)
		rt := bodyRoutes[int(target)%len(bodyRoutes)]
		contentType := fuzzContentTypes[int(framing)%len(fuzzContentTypes)]
		encoding := fuzzEncodings[int(framing>>2)%len(fuzzEncodings)]

		sent := body
		if encoding == "gzip" {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(body)
			_ = zw.Close()
			sent = buf.Bytes()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, rt.method, api.Prefix+rt.path, bytes.NewReader(sent))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if encoding != "" {
			req.Header.Set("Content-Encoding", strings.TrimSuffix(encoding, "-lie"))
		}
		token := e.tenantToken
		if rt.operator {
			token = e.operatorToken
		}
		req.Header.Set("Authorization", "Bearer "+token)

		before := e.snapshot(t)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		what := fmt.Sprintf("%s %s (Content-Type %q, Content-Encoding %q) %q", rt.method, rt.path, contentType, encoding, body)

		status := rec.Code
		if status >= 500 {
			t.Fatalf("%s: status %d: %s", what, status, rec.Body)
		}
		if status < 400 {
			if encoding != "" {
				t.Fatalf("%s: status %d for a body in an encoding the API does not decode", what, status)
			}
			if len(body) > 0 && !json.Valid(body) {
				t.Fatalf("%s: status %d for a body that is not one JSON value", what, status)
			}
			if rec.Body.Len() > 0 && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s: status %d with a body that is not JSON: %q", what, status, rec.Body)
			}
			return
		}
		var answer apiclient.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || strings.TrimSpace(answer.Message) == "" {
			t.Fatalf("%s: status %d without a JSON error message: %q", what, status, rec.Body)
		}
		if status == http.StatusUnprocessableEntity {
			top, _, _ := strings.Cut(answer.Field, ".")
			top, _, _ = strings.Cut(top, "[")
			if !slices.Contains(rt.fields, top) {
				t.Fatalf("%s: 422 names field %q, not one of the request's %v: %s", what, answer.Field, rt.fields, answer.Message)
			}
		}
		if encoding != "" && !strings.Contains(answer.Message, "Content-Encoding") {
			t.Fatalf("%s: status %d does not say the encoding is the problem: %s", what, status, answer.Message)
		}
		if after := e.snapshot(t); after != before {
			t.Fatalf("%s: refused with %d (%s), but the state changed:\n%s", what, status, answer.Message, stateDiff(before, after))
		}
	})
}

// bodyFuzzEnv is what FuzzAPIRequestBodies runs on, started at the first
// input: a process that only coordinates fuzzing workers starts nothing.
type bodyFuzzEnv struct {
	databaseURL string

	once sync.Once
	err  error
	cp   *controlplane.ControlPlane
	st   *store.Store

	handler       http.Handler
	kube          client.Client
	operatorToken string
	tenantToken   string
	// digests is the query snapshot reads the tables with: each table's
	// name and a digest of its rows.
	digests string
}

// get starts the environment on first use and fails t if it could not.
func (e *bodyFuzzEnv) get(t *testing.T) *bodyFuzzEnv {
	t.Helper()
	e.once.Do(func() { e.err = e.start() })
	if e.err != nil {
		t.Fatalf("starting the API: %v", e.err)
	}
	return e
}

func (e *bodyFuzzEnv) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr})
	if err != nil {
		return fmt.Errorf("starting control plane: %w", err)
	}
	e.cp = cp
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), deploy.CRDs()); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	if e.st, err = store.Open(ctx, e.databaseURL); err != nil {
		return fmt.Errorf("opening store: %w", err)
	}
	if e.kube, err = client.New(cp.RESTConfig(), client.Options{Scheme: apitest.NewScheme()}); err != nil {
		return fmt.Errorf("creating cluster client: %w", err)
	}
	srv, err := api.New(api.Options{
		Store: e.st, Kube: e.kube, Deployer: &apitest.Releaser{Store: e.st}, Logs: &apitest.Logs{}, Instances: api.RuntimeInstances{Driver: process.New(process.Options{})},
		GitBase: apitest.GitBase, AppDomain: apitest.AppDomain, EdgeAddresses: []string{apitest.EdgeAddress},
		ReservedHostnames: []string{apitest.ReservedHostname}, Log: logr.Discard(),
	})
	if err != nil {
		return fmt.Errorf("creating API server: %w", err)
	}
	e.handler = srv.Handler()

	op, err := e.st.CreateUser(ctx, store.NewUser{Email: "ops@bex.test", Role: store.RoleOperator})
	if err != nil {
		return fmt.Errorf("creating operator: %w", err)
	}
	if e.operatorToken, _, err = e.st.CreateToken(ctx, "", op.ID, "ops"); err != nil {
		return fmt.Errorf("creating operator token: %w", err)
	}
	if err := e.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fuzzTenant}}); err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}
	tenant, err := e.st.CreateTenant(ctx, fuzzTenant)
	if err != nil {
		return fmt.Errorf("creating tenant: %w", err)
	}
	if e.tenantToken, _, err = e.st.CreateToken(ctx, tenant.ID, "", "fuzz"); err != nil {
		return fmt.Errorf("creating tenant token: %w", err)
	}
	app := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: fuzzTenant, Name: fuzzApp, Labels: map[string]string{api.TenantLabel: fuzzTenant}}}
	if err := e.kube.Create(ctx, app); err != nil {
		return fmt.Errorf("creating app: %w", err)
	}
	rows, err := e.st.Pool().Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name")
	if err != nil {
		return fmt.Errorf("listing tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("listing tables: %w", err)
	}
	selects := make([]string, 0, len(tables))
	for _, table := range tables {
		// Table names are plain identifiers of the migrations.
		selects = append(selects, fmt.Sprintf(`SELECT '%s'::text, coalesce(md5(string_agg(r, ',' ORDER BY r)), '') `+
			`FROM (SELECT (to_jsonb(x) - 'last_used_at')::text AS r FROM %s x) rows`,
			table, pgx.Identifier{table}.Sanitize()))
	}
	e.digests = strings.Join(selects, " UNION ALL ")
	return nil
}

func (e *bodyFuzzEnv) stop() {
	if e.st != nil {
		e.st.Close()
	}
	if e.cp != nil {
		e.cp.Stop()
	}
}

// snapshot returns the state a request may change, one line per table and
// per kind: a digest of each table's rows (without tokens' last use, which
// every request sets), the namespaces, and the tenant's Apps, Routes and
// Secrets with their resource versions.
func (e *bodyFuzzEnv) snapshot(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	rows, err := e.st.Pool().Query(ctx, e.digests)
	if err != nil {
		t.Fatalf("reading the tables: %v", err)
	}
	digests, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var table, digest string
		err := row.Scan(&table, &digest)
		return "table " + table + ": " + digest, err
	})
	if err != nil {
		t.Fatalf("reading the tables: %v", err)
	}
	slices.Sort(digests)
	b.WriteString(strings.Join(digests, "\n") + "\n")
	for _, l := range []struct {
		kind string
		list client.ObjectList
		opts []client.ListOption
	}{
		{"namespaces", &corev1.NamespaceList{}, nil},
		{"apps", &platformv1alpha1.AppList{}, []client.ListOption{client.InNamespace(fuzzTenant)}},
		{"routes", &platformv1alpha1.RouteList{}, []client.ListOption{client.InNamespace(fuzzTenant)}},
		{"secrets", &corev1.SecretList{}, []client.ListOption{client.InNamespace(fuzzTenant)}},
	} {
		if err := e.kube.List(ctx, l.list, l.opts...); err != nil {
			t.Fatalf("listing %s: %v", l.kind, err)
		}
		var objs []string
		if err := meta.EachListItem(l.list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			objs = append(objs, m.GetName()+"@"+m.GetResourceVersion())
			return nil
		}); err != nil {
			t.Fatalf("reading %s: %v", l.kind, err)
		}
		slices.Sort(objs)
		fmt.Fprintf(&b, "%s: %s\n", l.kind, strings.Join(objs, " "))
	}
	return b.String()
}

// stateDiff shows the lines of two snapshots that differ.
func stateDiff(before, after string) string {
	a, b := strings.Split(before, "\n"), strings.Split(after, "\n")
	var out []string
	for i := range max(len(a), len(b)) {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			out = append(out, "- "+la, "+ "+lb)
		}
	}
	return strings.Join(out, "\n")
}
