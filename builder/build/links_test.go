package build_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"bex.co/bex/builder/build"
)

// secretContent is what a hostile tenant's links aim at: a file outside the
// checkout, as the operator token is. It has no colon, so a Procfile of it
// fails to parse, and pip refuses it as a requirement: both errors would
// quote it.
const secretContent = "operator-token s3cr3t-7f1c9a"

// climb is a chain of links each of which reads as inside the tree (its
// text stays below the root from where it is), while e resolves four
// directories above the checkout: a/up is the root, b its parent, and so on.
var climb = map[string]string{"a/up": "..", "b": "a/up/..", "c": "b/..", "d": "c/..", "e": "d/.."}

func TestLinksOutOfTheCheckoutFailTheBuild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		// link is the file that is a link; to is where it points, with
		// SECRET standing for the secret's absolute path.
		link, to string
		chain    bool
		// want names the offending link; default link.
		want string
	}{
		{name: "Procfile up", link: "Procfile", to: "../../../../operator-token"},
		{name: "Procfile absolute", link: "Procfile", to: "SECRET"},
		{name: "Procfile through a chain", link: "Procfile", to: "e/operator-token", chain: true},
		{name: "Procfile of a static site", files: map[string]string{"index.html": "hi\n"}, link: "Procfile", to: "SECRET"},
		{name: "package.json", files: map[string]string{"server.js": "1\n"}, link: "package.json", to: "../../../../operator-token"},
		{name: "package.json through a chain", files: map[string]string{"server.js": "1\n"}, link: "package.json", to: "e/operator-token", chain: true},
		{name: "requirements.txt", files: map[string]string{"app.py": "print(1)\n"}, link: "requirements.txt", to: "../../../../operator-token"},
		{name: "go.mod", files: map[string]string{"main.go": goMain}, link: "go.mod", to: "SECRET"},
		{name: "Dockerfile", link: "Dockerfile", to: "../../../../operator-token"},
		{name: "index.html", link: "index.html", to: "e/operator-token", chain: true},
		{name: "vendor directory", files: map[string]string{"go.mod": goMod, "main.go": goMain}, link: "vendor", to: "../../../..", want: "vendor"},
		// Nothing detection reads goes through the chain, but the image
		// would carry b, which leads outside.
		{name: "chain anywhere", files: map[string]string{"index.html": "hi\n"}, chain: true, want: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The checkout is WorkRoot/builds/<build>/app: four levels
			// below the secret.
			outside := t.TempDir()
			secret := filepath.Join(outside, "operator-token")
			if err := os.WriteFile(secret, []byte(secretContent+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			b := newBuilder(t, func(o *build.Options) { o.WorkRoot = filepath.Join(outside, "work") })
			links := map[string]string{}
			if tc.chain {
				for k, v := range climb {
					links[k] = v
				}
			}
			if tc.link != "" {
				links[tc.link] = strings.ReplaceAll(tc.to, "SECRET", secret)
			}
			want := tc.want
			if want == "" {
				want = tc.link
			}
			want += " is a symbolic link that leads outside the repository; commit the file itself"

			_, log, err := buildTree(t, b, tc.files, links, nil)
			if err == nil {
				t.Fatal("Build succeeded")
			}
			var le *build.LinkError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), want) {
				t.Errorf("error %q, want a *build.LinkError saying %q", err, want)
			}
			if !strings.Contains(log, " !     Build failed: "+want) {
				t.Errorf("log does not end with %q", want)
			}
			for _, s := range []string{err.Error(), log} {
				if strings.Contains(s, "s3cr3t") {
					t.Errorf("the secret's content reached the tenant:\n%s", s)
				}
			}
		})
	}
}

func TestLinksInsideTheCheckoutStillWork(t *testing.T) {
	b := newBuilder(t)
	res, _, err := buildTree(t, b,
		map[string]string{"index.html": "hi\n", "deploy/Procfile": "web: bex-static\nworker: sh worker.sh\n", "v2/page.html": "v2\n"},
		// latest goes through a/up, the root itself, and back down.
		map[string]string{"Procfile": "deploy/Procfile", "a/up": "..", "latest": "a/up/v2", "home.html": "index.html"},
		nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.Processes["web"] != "bex-static" || res.Processes["worker"] != "sh worker.sh" {
		t.Errorf("processes %v, want those of deploy/Procfile", res.Processes)
	}
	dir := filepath.Join(t.TempDir(), "release")
	if _, err := build.Unpack(context.Background(), res.Image, dir, b.Keychain()); err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "latest")); err != nil || l != "a/up/v2" {
		t.Errorf("latest links to %q, %v; want a/up/v2", l, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "latest", "page.html")); err != nil || string(b) != "v2\n" {
		t.Errorf("latest/page.html = %q, %v", b, err)
	}
}
