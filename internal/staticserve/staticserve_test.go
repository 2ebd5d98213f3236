package staticserve_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"bex.co/bex/internal/staticserve"
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
