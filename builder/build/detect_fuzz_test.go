package build

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// FuzzParseProcfile parses arbitrary Procfiles. An accepted one has only
// valid process type names and non-empty commands of one line, and
// formatting it and parsing it again gives the same processes; a refused
// one says which line is wrong.
func FuzzParseProcfile(f *testing.F) {
	for _, seed := range []string{
		"web: ./bin/app\n",
		"web: gunicorn app:app --bind 0.0.0.0:$PORT\nworker: python worker.py\n",
		"# comment\n\nweb:    npm start   \r\n",
		"web: a\nweb: b\n",
		"Web: x\n",
		"web\n",
		"web:\n",
		": x\n",
		"a-very-long-process-name-indeed: x\n",
		"w-: x\n",
		"release: ./migrate && echo 'done: ok' # not a comment\n",
		"web: \x00\n",
		"\ufeffweb: x\n",
		"web: x\rworker: y\n",
		strings.Repeat("x", 70000) + ": y\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		procs, err := parseProcfile(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "Procfile line ") && !strings.HasPrefix(err.Error(), "reading Procfile: ") {
				t.Fatalf("error %q does not say where the Procfile is wrong", err)
			}
			return
		}
		var formatted strings.Builder
		for _, name := range slices.Sorted(mapKeys(procs)) {
			cmd := procs[name]
			if !processNamePattern.MatchString(name) {
				t.Fatalf("accepted process type %q", name)
			}
			if cmd == "" || cmd != strings.TrimSpace(cmd) || strings.ContainsFunc(cmd, isControl) {
				t.Fatalf("accepted command %q for %s", cmd, name)
			}
			fmt.Fprintf(&formatted, "%s: %s\n", name, cmd)
		}
		again, err := parseProcfile(formatted.String())
		if err != nil {
			t.Fatalf("the formatted Procfile %q does not parse: %v", formatted.String(), err)
		}
		if fmt.Sprint(again) != fmt.Sprint(procs) {
			t.Fatalf("round trip: parsed %v, formatted and parsed again %v", procs, again)
		}
	})
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// outsideMarker is in every file next to the fuzzed tree: a plan, a
// process or an error that holds it read outside the tree.
const outsideMarker = "OUTSIDE-THE-TREE"

// outsideFiles are the stack files beside the fuzzed tree, each of which
// would show in the plan if the detector read it.
var outsideFiles = map[string]string{
	"go.mod":           "module " + outsideMarker + "\n",
	"package.json":     `{"main": "` + outsideMarker + `.js", "dependencies": {"x": "1"}}`,
	"requirements.txt": outsideMarker + "\n",
	"pyproject.toml":   "[project]\nname = \"" + outsideMarker + "\"\n",
	"index.html":       outsideMarker,
	"Procfile":         "web: " + outsideMarker + "\n",
	"Dockerfile":       "FROM " + outsideMarker + "\n",
	"app.py":           outsideMarker,
	"server.js":        outsideMarker,
}

// fuzzTree makes a tree from data: records separated by NUL, each
// "<kind><name>=<content>", kind f (file), x (executable file), d
// (directory), l (symbolic link to content; "@OUT@" in it stands for the
// directory beside the tree) or p (named pipe). Records that os.Root
// refuses to make (a name through a link that leaves the tree) are skipped:
// making the tree must not write outside it either.
func fuzzTree(t *testing.T, data []byte) (tree, outside string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tree, outside = filepath.Join(base, "tree"), filepath.Join(base, "outside")
	for _, d := range []string{tree, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range outsideFiles {
		if err := os.WriteFile(filepath.Join(outside, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(tree)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	records := bytes.Split(data, []byte{0})
	for _, rec := range records[:min(len(records), 64)] {
		if len(rec) < 2 {
			continue
		}
		kind := rec[0]
		name, content, _ := bytes.Cut(rec[1:], []byte("="))
		n := path.Clean(string(name))
		if !fs.ValidPath(n) || n == "." || len(n) > 200 {
			continue
		}
		if dir := path.Dir(n); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				continue
			}
		}
		switch kind {
		case 'f', 'x':
			mode := os.FileMode(0o644)
			if kind == 'x' {
				mode = 0o755
			}
			_ = root.WriteFile(n, content, mode)
		case 'd':
			_ = root.MkdirAll(n, 0o755)
		case 'l':
			_ = root.Symlink(strings.ReplaceAll(string(content), "@OUT@", outside), n)
		case 'p':
			// A pipe inside the tree only: mkfifo has no os.Root form, so
			// its directory must be a real one inside.
			if real, err := filepath.EvalSymlinks(filepath.Join(tree, filepath.Dir(n))); err == nil && inside(tree, real) {
				_ = syscall.Mkfifo(filepath.Join(real, path.Base(n)), 0o644)
			}
		}
	}
	return tree, outside
}

// inside reports whether p is dir or under it.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

var knownStacks = []platformv1alpha1.Stack{
	platformv1alpha1.StackDockerfile, platformv1alpha1.StackGo, platformv1alpha1.StackNode,
	platformv1alpha1.StackPython, platformv1alpha1.StackStatic, platformv1alpha1.StackProcfile,
}

// FuzzDetect plans builds of arbitrary trees, with arbitrary stack
// overrides and Dockerfile paths, next to a directory of stack files. The
// planner never reads outside the tree (nothing of the files beside it
// shows in a plan, its processes or an error), always answers a known stack
// or an error, and the link check accepts only trees whose every link
// resolves inside (or to nothing).
func FuzzDetect(f *testing.F) {
	for _, seed := range []struct{ tree, stack, dockerfile string }{
		{"fgo.mod=module x\x00fmain.go=package main", "", ""},
		{"fpackage.json={\"scripts\":{\"start\":\"node s.js\",\"build\":\"x\"},\"devDependencies\":{\"a\":\"1\"}}\x00fpackage-lock.json={}", "", ""},
		{"fpackage.json={\"main\":\"it's.js\"}", "", ""},
		{"fpackage.json=[1,2", "", ""},
		{"frequirements.txt=# none\n\x00fmain.py=print(1)", "", ""},
		{"fpyproject.toml=[project]\x00fapp.py=x", "python", ""},
		{"findex.html=<h1>hi</h1>\x00fProcfile=web: x", "", ""},
		{"fProcfile=web: ./run", "procfile", ""},
		{"fDockerfile=FROM scratch", "", ""},
		{"fdeploy/app.Dockerfile=FROM scratch\x00fdeploy/app.Dockerfile.dockerignore=x", "", "deploy/app.Dockerfile"},
		{"fgo.mod=x", "rust", ""},
		{"fgo.mod=x", "go", "Dockerfile"},
		{"", "", ""},
		{"lgo.mod=../outside/go.mod", "", ""},
		{"lpackage.json=@OUT@/package.json", "", ""},
		{"frequirements.txt=x\x00lapp.py=../outside/app.py", "", ""},
		{"fpackage.json={}\x00lserver.js=@OUT@/server.js", "", ""},
		{"lup=..\x00lProcfile=up/outside/Procfile", "", ""},
		{"la/up=..\x00ll1=a/up/..\x00fgo.mod=x", "", ""},
		{"lindex.html=index.html", "", ""},
		{"la=b\x00lb=a\x00lgo.mod=a", "", ""},
		{"ldeploy=@OUT@\x00fgo.mod=x", "", "deploy/Dockerfile"},
		{"fgo.mod=x\x00lvendor=../outside", "", ""},
		{"fgo.mod=x\x00lvendor=/", "", ""},
		{"dgo.mod", "", ""},
		{"pgo.mod\x00pProcfile", "", ""},
		{"fpackage.json={}\x00pserver.js\x00pindex.js", "", ""},
		{"fDockerfile=x\x00p.dockerignore", "", ""},
		{"fProcfile=web: x\x00ldangling=nowhere/at/all", "", ""},
		{"fProcfile=web: x", "", "../outside/Dockerfile"},
		{"fProcfile=web: x", "", "/etc/passwd"},
	} {
		f.Add([]byte(seed.tree), seed.stack, seed.dockerfile)
	}
	f.Fuzz(func(t *testing.T, data []byte, stack, dockerfile string) {
		tree, outside := fuzzTree(t, data)
		root, err := os.OpenRoot(tree)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		noOutside := func(what, s string) {
			t.Helper()
			if strings.Contains(s, outsideMarker) || strings.Contains(s, outside) {
				t.Fatalf("%s shows what is outside the tree: %s", what, s)
			}
		}

		p, err := plan(root.FS(), Request{Stack: platformv1alpha1.Stack(stack), Dockerfile: dockerfile}, true)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("plan failed with an empty error")
			}
			noOutside("the plan's error", err.Error())
			return
		}
		if p == nil || !slices.Contains(knownStacks, p.stack) {
			t.Fatalf("plan = %+v with no error, want a known stack", p)
		}
		if stack != "" && p.stack != platformv1alpha1.Stack(stack) {
			t.Fatalf("stack %s planned for the override %q", p.stack, stack)
		}
		noOutside("the plan", fmt.Sprintf("%s %q %v %v %v", p.title, p.dockerfile, p.env, p.processes, stepArgs(p.steps)))

		linkErr := checkLinks(root)
		var le *LinkError
		switch {
		case linkErr == nil:
			if escaping := escapingLinks(t, tree); len(escaping) > 0 {
				t.Fatalf("checkLinks accepted the tree with links that lead outside: %v", escaping)
			}
		case errors.As(linkErr, &le):
			noOutside("the link error", linkErr.Error())
		}

		procs, err := processes(root.FS(), p.processes)
		if err != nil {
			noOutside("the processes' error", err.Error())
			return
		}
		noOutside("the processes", fmt.Sprint(procs))
		if len(procs) == 0 {
			t.Fatal("processes answered none and no error")
		}
	})
}

func stepArgs(steps []step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.title+" "+strings.Join(s.argv, " ")+" "+strings.Join(s.env, " ")+" "+s.display)
	}
	return out
}

// escapingLinks lists the links under tree that, followed as the kernel
// does, resolve to an existing file outside it.
func escapingLinks(t *testing.T, tree string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		real, err := filepath.EvalSymlinks(p)
		if err == nil && !inside(tree, real) {
			out = append(out, strings.TrimPrefix(p, tree+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
