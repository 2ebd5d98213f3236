package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apitest"
)

// get starts a GET with token and returns the answer with its body open;
// the body is closed when t ends.
func get(t *testing.T, ctx context.Context, e *apitest.Env, path, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+api.Prefix+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// clientSessions counts the client sessions of pool's database other than
// the caller's own.
func clientSessions(ctx context.Context, t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatalf("counting sessions: %v", err)
	}
	return n
}

// 150 clients follow one build's log through the API, on a server that takes
// 30 connections: each gets every line, a push still records its build,
// and the API's process keeps to a few connections.
func testLogFollowers(t *testing.T, cp *controlplane.ControlPlane) {
	const followers = 150
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dbURL := pgtest.NewServerDatabase(t, map[string]string{"max_connections": "30"})
	e := apitest.StartWith(t, cp, apitest.Options{DatabaseURL: dbURL, MaxLogStreamsPerTenant: followers})
	tenant, token := e.TenantToken(t, "followersacme")
	createApp(t, e, token, "web")
	b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.AppendBuildLog(ctx, b.ID, "ready"); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, followers)
	results := make(chan string, followers)
	for range followers {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+api.Prefix+"/apps/web/builds/latest/log?follow=true", nil)
			if err != nil {
				results <- err.Error()
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results <- err.Error()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(resp.Body)
				results <- fmt.Sprintf("status %d: %s", resp.StatusCode, body)
				return
			}
			var got []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if got = append(got, sc.Text()); sc.Text() == "ready" {
					started <- struct{}{}
				}
			}
			results <- strings.Join(got, ",")
		}()
	}
	for range followers {
		select {
		case <-started:
		case got := <-results:
			t.Fatalf("a follower ended before the build did: %s", got)
		case <-ctx.Done():
			t.Fatal("the followers did not all start")
		}
	}
	if n := clientSessions(ctx, t, e.Store.Pool()); n > 20 {
		t.Errorf("%d followers hold %d connections of the server, want at most 20", followers, n)
	}

	// A push still records its build, and its lines reach every follower.
	if _, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "api"}); err != nil {
		t.Fatalf("creating a build while %d clients follow: %v", followers, err)
	}
	want := []string{"ready"}
	for i := range 3 {
		line := fmt.Sprintf("step %d", i)
		if err := e.Store.AppendBuildLog(ctx, b.ID, line); err != nil {
			t.Fatalf("appending while %d clients follow: %v", followers, err)
		}
		want = append(want, line)
	}
	if _, err := e.Store.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildFailed, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	for range followers {
		select {
		case got := <-results:
			if got != strings.Join(want, ",") {
				t.Fatalf("a follower got %q, want %q", got, strings.Join(want, ","))
			}
		case <-ctx.Done():
			t.Fatal("the followers did not all finish")
		}
	}
}

// A tenant follows at most DefaultMaxLogStreamsPerTenant logs at once: the
// next stream, of a build's log or of an app's, is answered 429 saying so,
// while another tenant's streams work, and a stream that ends makes room.
func testLogStreamCap(t *testing.T, cp *controlplane.ControlPlane) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	e := apitest.Start(t, cp)
	acme, acmeToken := e.TenantToken(t, "capacme")
	globex, globexToken := e.TenantToken(t, "capglobex")
	for _, tt := range []struct {
		tenant store.Tenant
		token  string
	}{{acme, acmeToken}, {globex, globexToken}} {
		createApp(t, e, tt.token, "web")
		if _, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tt.tenant.ID, App: "web"}); err != nil {
			t.Fatal(err)
		}
	}
	const buildLog = "/apps/web/builds/latest/log?follow=true"
	var cancels []context.CancelFunc
	for i := range api.DefaultMaxLogStreamsPerTenant {
		sctx, stop := context.WithCancel(ctx)
		cancels = append(cancels, stop)
		path := buildLog
		if i%2 == 1 {
			path = "/apps/web/logs?follow=true"
		}
		if resp := get(t, sctx, e, path, acmeToken); resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of %d: status %d", i+1, api.DefaultMaxLogStreamsPerTenant, resp.StatusCode)
		}
	}
	for _, path := range []string{buildLog, "/apps/web/logs?follow=true"} {
		resp := get(t, ctx, e, path, acmeToken)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("one stream past the cap (%s): status %d, want 429", path, resp.StatusCode)
		}
		body, _ := io.ReadAll(resp.Body)
		if msg := string(body); !strings.Contains(msg, fmt.Sprint(api.DefaultMaxLogStreamsPerTenant)) || !strings.Contains(msg, "log streams") {
			t.Errorf("429 says %q, want the cap named", msg)
		}
	}
	// Reading a log without following is no stream.
	wantStatus(t, "reading a build log", call(t, e, http.MethodGet, "/apps/web/builds/latest/log", acmeToken, nil), http.StatusOK)
	// Another tenant is not held up.
	if resp := get(t, ctx, e, buildLog, globexToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("another tenant's stream: status %d", resp.StatusCode)
	}
	// A stream that ends makes room for one more.
	cancels[0]()
	// The new stream lives on after the try, so it runs under the test's
	// context, not the try's.
	platformtest.Eventually(t, 2*time.Minute, "a stream's end to make room", func(context.Context) error {
		sctx, stop := context.WithCancel(ctx)
		resp := get(t, sctx, e, buildLog, acmeToken)
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			stop()
			return fmt.Errorf("one more stream: status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		cancels = append(cancels, stop)
		return nil
	})
	for _, stop := range cancels {
		stop()
	}
}

// A follow that cannot start, here because the database takes no more
// connections, is answered with an error status instead of an empty 200;
// once connections are free again, following works.
func testLogStreamStartFails(t *testing.T, cp *controlplane.ControlPlane) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.NewServerDatabase(t, map[string]string{"max_connections": "15"})
	e := apitest.StartWith(t, cp, apitest.Options{DatabaseURL: dbURL})
	tenant, token := e.TenantToken(t, "startacme")
	createApp(t, e, token, "web")
	if _, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "web"}); err != nil {
		t.Fatal(err)
	}
	// Take every connection the server has left.
	var hogs []*pgx.Conn
	defer func() {
		for _, c := range hogs {
			_ = c.Close(context.Background())
		}
	}()
	for {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			if !strings.Contains(err.Error(), "too many clients") {
				t.Fatalf("taking the server's connections: %v", err)
			}
			break
		}
		hogs = append(hogs, c)
	}
	a := call(t, e, http.MethodGet, "/apps/web/builds/latest/log?follow=true", token, nil)
	wantStatus(t, "following while the database refuses connections", a, http.StatusServiceUnavailable)
	if msg := a.err().Message; !strings.Contains(msg, "cannot follow") {
		t.Errorf("503 says %q, want why", msg)
	}

	for _, c := range hogs {
		_ = c.Close(ctx)
	}
	hogs = nil
	platformtest.Eventually(t, 2*time.Minute, "following to work again", func(ctx context.Context) error {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		resp := get(t, sctx, e, "/apps/web/builds/latest/log?follow=true", token)
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	})
}
