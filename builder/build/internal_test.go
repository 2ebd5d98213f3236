package build

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/testtree"
)

func TestDetect(t *testing.T) {
	file := &fstest.MapFile{Data: []byte("x")}
	for _, tc := range []struct {
		name       string
		files      []string
		override   platformv1alpha1.Stack
		dockerfile string
		want       platformv1alpha1.Stack
		wantErr    string
	}{
		{name: "go", files: []string{"go.mod", "index.html"}, want: platformv1alpha1.StackGo},
		{name: "node before static", files: []string{"package.json", "index.html"}, want: platformv1alpha1.StackNode},
		{name: "python requirements", files: []string{"requirements.txt"}, want: platformv1alpha1.StackPython},
		{name: "python pyproject", files: []string{"pyproject.toml"}, want: platformv1alpha1.StackPython},
		{name: "static", files: []string{"index.html", "Procfile"}, want: platformv1alpha1.StackStatic},
		{name: "procfile alone", files: []string{"Procfile"}, want: platformv1alpha1.StackProcfile},
		{name: "dockerfile first", files: []string{"Dockerfile", "go.mod"}, want: platformv1alpha1.StackDockerfile},
		{name: "subdirectory does not count", files: []string{"web/go.mod"}, wantErr: "none of Dockerfile, go.mod, package.json, requirements.txt, pyproject.toml, index.html, Procfile"},
		{name: "override wins", files: []string{"go.mod", "Procfile"}, override: platformv1alpha1.StackProcfile, want: platformv1alpha1.StackProcfile},
		{name: "override unsatisfied", files: []string{"go.mod"}, override: platformv1alpha1.StackPython, wantErr: "the app's stack is python, but the repository has no requirements.txt or pyproject.toml"},
		{name: "dockerfile path", files: []string{"deploy/app.Dockerfile"}, dockerfile: "deploy/app.Dockerfile", want: platformv1alpha1.StackDockerfile},
		{name: "dockerfile path missing", files: []string{"go.mod"}, dockerfile: "deploy/app.Dockerfile", wantErr: "has no deploy/app.Dockerfile"},
		{name: "dockerfile path with other stack", files: []string{"go.mod"}, dockerfile: "Dockerfile", override: platformv1alpha1.StackGo, wantErr: "needs the dockerfile stack"},
		{name: "unknown override", files: []string{"go.mod"}, override: "rust", wantErr: `unknown stack "rust"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tc.files {
				fsys[f] = file
			}
			got, err := detect(fsys, tc.override, tc.dockerfile)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("detect = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNodeProcesses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"start script", fstest.MapFS{"package.json": {Data: []byte(`{"main":"x.js","scripts":{"start":"node x.js"}}`)}}, "npm start"},
		{"main", fstest.MapFS{"package.json": {Data: []byte(`{"main":"lib/my app.js"}`)}}, "node 'lib/my app.js'"},
		{"server.js", fstest.MapFS{"package.json": {Data: []byte(`{}`)}, "server.js": {}}, "node server.js"},
		{"nothing", fstest.MapFS{"package.json": {Data: []byte(`{}`)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := nodePlan(tc.files)
			if err != nil {
				t.Fatal(err)
			}
			if p.processes["web"] != tc.want {
				t.Errorf("web = %q, want %q", p.processes["web"], tc.want)
			}
		})
	}
}

func TestParseProcfile(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		wantErr  string
	}{
		{name: "types and comments", in: "# hi\n\nweb: ./bin/app --port $PORT\nworker:  python w.py  \n", want: map[string]string{"web": "./bin/app --port $PORT", "worker": "python w.py"}},
		{name: "colon in command", in: "web: echo a:b\n", want: map[string]string{"web": "echo a:b"}},
		{name: "no command", in: "web:\n", wantErr: "line 1: want"},
		{name: "bad name", in: "Web_1: x\n", wantErr: `process type "Web_1"`},
		{name: "too long", in: strings.Repeat("a", 23) + ": x\n", wantErr: "at most 22"},
		{name: "duplicate", in: "web: a\nweb: b\n", wantErr: "declared twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcfile(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseProcfile = %v, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("parseProcfile = %v, %v; want %v", got, err, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestRelocateScript(t *testing.T) {
	const bin = "/w/builds/x/app/.venv/bin"
	for _, tc := range []struct {
		name, in, want string
		changed        bool
	}{
		{"shebang", "#!" + bin + "/python\nimport sys\n", "#!/usr/bin/env python3\nimport sys\n", true},
		{"trampoline", "#!/bin/sh\n'''exec' \"" + bin + "/python\" \"$0\" \"$@\"\n' '''\n# -*- coding: utf-8 -*-\nimport re\n", "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\nimport re\n", true},
		{"other script", "#!/bin/sh\necho hi\n", "#!/bin/sh\necho hi\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := relocateScript([]byte(tc.in), bin)
			if string(got) != tc.want || changed != tc.changed {
				t.Errorf("relocateScript = %q, %v; want %q, %v", got, changed, tc.want, tc.changed)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	var writes []string
	lw := newLineWriter(writerFunc(func(p []byte) (int, error) {
		writes = append(writes, string(p))
		return len(p), nil
	}))
	for _, s := range []string{"hel", "lo\nwor", "ld\r\n10%\r20%\rdone\n", "tail"} {
		_, _ = lw.Write([]byte(s))
	}
	lw.Flush()
	want := []string{"hello\n", "world\n", "10%\n", "20%\n", "done\n", "tail\n"}
	if strings.Join(writes, "|") != strings.Join(want, "|") {
		t.Errorf("writes %q, want %q", writes, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestLinkTextInside(t *testing.T) {
	for _, tc := range []struct {
		rel, link string
		want      bool
	}{
		{"node_modules/.bin/x", "../x/bin/x.js", true},
		{"a", "b/c", true},
		{"a/b", "../../etc/passwd", false},
		{"a", "..", false},
		{"a", "/etc/passwd", false},
		{"a", "/app/b", false},
	} {
		if got := linkTextInside(tc.rel, tc.link); got != tc.want {
			t.Errorf("linkTextInside(%q, %q) = %v, want %v", tc.rel, tc.link, got, tc.want)
		}
	}
}

// linkTree makes a tree of files (path -> content) and links (path ->
// target) in a directory app next to a file secret, and returns the
// directory opened as a root.
func linkTree(t *testing.T, files, links map[string]string) *os.Root {
	t.Helper()
	parent := t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "secret"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "app")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, dir, files, links)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestCheckLinksFollowsChains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		links   map[string]string
		wantErr string
	}{
		// Each link of the chain reads as inside; b resolves to app/..
		{"chain", map[string]string{"a/up": "..", "b": "a/up/.."}, "b is a symbolic link that leads outside the repository"},
		{"longer chain", map[string]string{"a/up": "..", "x/b": "../a/up/a/up/..", "x/c": "b/secret"}, "x/b is a symbolic link that leads outside"},
		{"loop", map[string]string{"p": "q", "q": "p"}, "p is a symbolic link that never resolves"},
		{"absolute", map[string]string{"abs": "/etc/passwd"}, "abs is a symbolic link that leads outside"},
		{"up", map[string]string{"d/s": "../../secret"}, "d/s is a symbolic link that leads outside"},
		{"inside", map[string]string{"a/up": "..", "again": "a/up/a/up/a", "dangling": "missing/file", "self": "."}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLinks(linkTree(t, nil, tc.links))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("checkLinks = %v, want nil", err)
				}
				return
			}
			var le *LinkError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("checkLinks = %v, want a *LinkError containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestReadFileThroughRoot(t *testing.T) {
	root := linkTree(t, map[string]string{"docs/Procfile": "web: x\n"},
		map[string]string{"a/up": "..", "b": "a/up/..", "Procfile": "b/secret", "abs": "/etc/hostname", "inside": "docs/Procfile"})
	fsys := root.FS()
	for _, name := range []string{"Procfile", "abs"} {
		b, err := readFile(fsys, name)
		var le *LinkError
		if !errors.As(err, &le) || le.Name != name || len(b) != 0 {
			t.Errorf("readFile(%s) = %q, %v; want a *LinkError naming it", name, b, err)
		}
		if ok, err := isFile(fsys, name); ok || !errors.As(err, &le) {
			t.Errorf("isFile(%s) = %v, %v; want a *LinkError", name, ok, err)
		}
	}
	if b, err := readFile(fsys, "inside"); err != nil || string(b) != "web: x\n" {
		t.Errorf("readFile(inside) = %q, %v", b, err)
	}
	if _, err := readFile(fsys, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readFile(missing) = %v, want fs.ErrNotExist", err)
	}
	if err := root.WriteFile("big", make([]byte, maxStackFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readFile(fsys, "big"); err == nil || !strings.Contains(err.Error(), "big is larger than 1024 KiB") {
		t.Errorf("readFile(big) = %v, want the size refused", err)
	}
}

func TestExtractRefusesChains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
		wantErr string
	}{
		{"chain", []entry{
			{name: "app/a/up", link: "..", typ: tar.TypeSymlink},
			{name: "app/b", link: "a/up/..", typ: tar.TypeSymlink},
		}, "symbolic link b leaves the directory"},
		// b is checked on its own before a/up exists to make it escape.
		{"chain, the link first", []entry{
			{name: "app/b", link: "a/up/..", typ: tar.TypeSymlink},
			{name: "app/a/up", link: "..", typ: tar.TypeSymlink},
		}, "symbolic link b leaves the directory"},
		// A hard link to a link is a link whose text was never checked
		// where it lands.
		{"hard link to a link", []entry{
			{name: "app/a/up", link: "..", typ: tar.TypeSymlink},
			{name: "app/top", link: "app/a/up", typ: tar.TypeLink},
		}, "symbolic link top leaves the directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := linkTree(t, nil, nil)
			x := &extractor{root: root}
			err := x.extract(tarOf(t, tc.entries))
			if err == nil {
				err = x.finish()
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("extract = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarOf(t *testing.T, entries []entry) *tar.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return tar.NewReader(&buf)
}

func TestExtractRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
		wantErr string
	}{
		{"dotdot", []entry{{name: "app/../../evil", body: "x", typ: tar.TypeReg}}, "leaves the directory"},
		{"absolute", []entry{{name: "/app/evil", body: "x", typ: tar.TypeReg}}, "absolute name"},
		{"symlink out", []entry{{name: "app/l", link: "../../../etc", typ: tar.TypeSymlink}}, "leaves the directory"},
		{"absolute symlink", []entry{{name: "app/l", link: "/etc/passwd", typ: tar.TypeSymlink}}, "leaves the directory"},
		{"hard link out", []entry{{name: "app/h", link: "etc/passwd", typ: tar.TypeLink}}, "leaves the directory"},
		{"device", []entry{{name: "app/dev", typ: tar.TypeChar}}, "unsupported entry type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "app")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			x := &extractor{root: root}
			err = x.extract(tarOf(t, tc.entries))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("extract = %v, want error containing %q", err, tc.wantErr)
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Errorf("extraction wrote next to its directory: %v", entries)
			}
		})
	}
}

func TestExtractKeepsModesAndLinks(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	x := &extractor{root: root}
	err = x.extract(tarOf(t, []entry{
		{name: "app/", typ: tar.TypeDir, mode: 0o755},
		{name: "app/bin/", typ: tar.TypeDir, mode: 0o750},
		{name: "app/bin/run", body: "#!/bin/sh\n", typ: tar.TypeReg, mode: 0o4755},
		{name: "app/run", link: "bin/run", typ: tar.TypeSymlink},
		{name: "app/copy", link: "app/bin/run", typ: tar.TypeLink},
		{name: "etc/ignored", body: "x", typ: tar.TypeReg},
		{name: "app/gone", body: "x", typ: tar.TypeReg},
		{name: "app/.wh.gone", typ: tar.TypeReg},
	}))
	if err == nil {
		err = x.finish()
	}
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "bin", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o755 {
		t.Errorf("bin/run mode %v, want 0755 without setuid", fi.Mode())
	}
	if !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("bin/run mtime %v", fi.ModTime())
	}
	if di, err := os.Stat(filepath.Join(dir, "bin")); err != nil || di.Mode().Perm() != 0o750 {
		t.Errorf("bin mode %v, %v; want 0750", di.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "run")); err != nil || l != "bin/run" {
		t.Errorf("run links to %q, %v", l, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "copy")); err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("hard link copy = %q, %v", b, err)
	}
	for _, missing := range []string{"etc", "gone", ".wh.gone"} {
		if _, err := os.Lstat(filepath.Join(dir, missing)); !os.IsNotExist(err) {
			t.Errorf("%s exists", missing)
		}
	}
}

func TestRunEnv(t *testing.T) {
	for _, tc := range []struct {
		name        string
		base, stack []string
		want        []string
	}{
		{
			name:  "stack values win, the run image's PATH follows the app's entries",
			base:  []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "NODE_ENV=development"},
			stack: []string{"PATH=/app/node_modules/.bin:/app/bin:" + defaultPath, "NODE_ENV=production"},
			want:  []string{"PATH=/app/node_modules/.bin:/app/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "NODE_ENV=production"},
		},
		{
			name:  "no PATH in the run image",
			base:  []string{"LANG=C.UTF-8"},
			stack: []string{"PATH=/app/bin:" + defaultPath, "VIRTUAL_ENV=/app/.venv"},
			want:  []string{"LANG=C.UTF-8", "PATH=/app/bin:" + defaultPath, "VIRTUAL_ENV=/app/.venv"},
		},
		{
			name:  "an empty PATH counts as none",
			base:  []string{"PATH="},
			stack: []string{"PATH=/app/bin:" + defaultPath},
			want:  []string{"PATH=/app/bin:" + defaultPath},
		},
		{
			name:  "not /application",
			base:  []string{"PATH=/bin"},
			stack: []string{"PATH=/application/bin:/app:/app/bin"},
			want:  []string{"PATH=/app:/app/bin:/bin"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runEnv(tc.base, tc.stack); !slices.Equal(got, tc.want) {
				t.Errorf("runEnv = %q, want %q", got, tc.want)
			}
		})
	}
}
