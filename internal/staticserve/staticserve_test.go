package staticserve_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"bex.co/bex/internal/staticserve"
	"bex.co/bex/internal/testtree"
	"bex.co/bex/test/platformtest"
)

func TestHandler(t *testing.T) {
	site := fstest.MapFS{
		"index.html":               {Data: []byte("home")},
		"docs/index.html":          {Data: []byte("docs")},
		"style.css":                {Data: []byte("body{}")},
		".env":                     {Data: []byte("SECRET=1")},
		"assets/.secret":           {Data: []byte("hidden")},
		".well-known/security.txt": {Data: []byte("contact")},
		"404.html":                 {Data: []byte("custom 404")},
	}
	srv := httptest.NewServer(staticserve.Handler(site))
	defer srv.Close()
	for _, tc := range []struct {
		path       string
		wantStatus int
		wantBody   string
	}{
		{"/", 200, "home"},
		{"/docs/", 200, "docs"},
		{"/style.css", 200, "body{}"},
		{"/.env", 404, "custom 404"},
		{"/assets/.secret", 404, "custom 404"},
		{"/.well-known/security.txt", 200, "contact"},
		{"/missing", 404, "custom 404"},
		{"/../index.html", 200, "home"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || string(b) != tc.wantBody {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, resp.StatusCode, b, tc.wantStatus, tc.wantBody)
		}
	}
}

func TestRunServesNothingOutsideTheDirectory(t *testing.T) {
	// The app is outside/x/app; a secret is in outside and in outside/x.
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	app := filepath.Join(outside, "x", "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{secret, filepath.Join(outside, "x", "secret")} {
		if err := os.WriteFile(p, []byte("s3cr3t outside the app"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"index.html": "home", "v2/page.html": "v2", "docs/readme.txt": "docs"}
	links := map[string]string{
		"up":              "../..",
		"rel":             "../../secret",
		"abs":             secret,
		"a/up":            "..",
		"b":               "a/up/..", // outside/x: each link reads as inside
		"c":               "b/..",    // outside
		"404.html":        "c/secret",
		"docs/index.html": "../../../secret",
		"latest":          "a/up/v2", // inside, through a/up
		"home.html":       "index.html",
	}
	testtree.Write(t, app, files, links)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	o := staticserve.Options{Dir: app, Port: port, Host: "127.0.0.1"}
	o.Complete()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- o.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	})
	base := "http://127.0.0.1:" + port
	get := func(p string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	platformtest.Eventually(t, 10*time.Second, "bex-static to answer", func(context.Context) error {
		select {
		case err := <-errc:
			t.Fatalf("Run ended: %v", err)
		default:
		}
		resp, err := http.Get(base + "/")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	})

	for _, p := range []string{"/up/secret", "/rel", "/abs", "/b/secret", "/c/secret", "/missing", "/docs/", "/docs/index.html"} {
		code, body := get(p)
		if strings.Contains(body, "s3cr3t") {
			t.Errorf("GET %s = %d, serves the file outside the app", p, code)
		}
		if p != "/docs/" && code != http.StatusNotFound {
			t.Errorf("GET %s = %d %q, want 404", p, code, body)
		}
	}
	for p, want := range map[string]string{"/": "home", "/latest/page.html": "v2", "/home.html": "home", "/a/up/index.html": "home"} {
		if code, body := get(p); code != http.StatusOK || body != want {
			t.Errorf("GET %s = %d %q, want 200 %q", p, code, body, want)
		}
	}
}
