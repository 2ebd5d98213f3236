package build

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// buildPlan is what a stack does with a checkout.
type buildPlan struct {
	stack platformv1alpha1.Stack
	title string // "Go app"
	steps []step
	// processes are the stack's default process types; a Procfile
	// overrides them type by type.
	processes map[string]string
	// env is the image's environment; "/app" is where the files land.
	env []string
	// dockerfile is the Dockerfile's path for the dockerfile stack.
	dockerfile string
}

// ErrNoBuildKit refuses a Dockerfile when no buildkitd is configured.
var ErrNoBuildKit = errors.New("Dockerfile builds need BuildKit: set --buildkit-addr; or remove the Dockerfile to use stack detection")

// stackFiles are the files detection looks for, in order.
var stackFiles = []struct {
	stack platformv1alpha1.Stack
	files []string
}{
	{platformv1alpha1.StackDockerfile, []string{"Dockerfile"}},
	{platformv1alpha1.StackGo, []string{"go.mod"}},
	{platformv1alpha1.StackNode, []string{"package.json"}},
	{platformv1alpha1.StackPython, []string{"requirements.txt", "pyproject.toml"}},
	{platformv1alpha1.StackStatic, []string{"index.html"}},
	{platformv1alpha1.StackProcfile, []string{"Procfile"}},
}

// detect picks the stack of the checkout in fsys: the override when set
// (which the files must satisfy), otherwise the first stack whose files are
// there.
func detect(fsys fs.FS, override platformv1alpha1.Stack, dockerfile string) (platformv1alpha1.Stack, error) {
	if dockerfile != "" {
		if override != "" && override != platformv1alpha1.StackDockerfile {
			return "", fmt.Errorf("a Dockerfile path was given, but the stack is %s; the Dockerfile path needs the dockerfile stack", override)
		}
		override = platformv1alpha1.StackDockerfile
	}
	if override != "" {
		for _, sf := range stackFiles {
			if sf.stack != override {
				continue
			}
			files := sf.files
			if override == platformv1alpha1.StackDockerfile && dockerfile != "" {
				files = []string{dockerfile}
			}
			ok, err := anyFile(fsys, files)
			if err != nil {
				return "", err
			}
			if ok {
				return override, nil
			}
			return "", fmt.Errorf("the app's stack is %s, but the repository has no %s at its root", override, strings.Join(files, " or "))
		}
		return "", fmt.Errorf("unknown stack %q (known: go, node, python, static, procfile, dockerfile)", override)
	}
	var looked []string
	for _, sf := range stackFiles {
		ok, err := anyFile(fsys, sf.files)
		if err != nil {
			return "", err
		}
		if ok {
			return sf.stack, nil
		}
		looked = append(looked, sf.files...)
	}
	return "", fmt.Errorf("could not detect the app's stack: the repository root has none of %s; add one of them, or set the app's build stack", strings.Join(looked, ", "))
}

// plan detects the stack of the checkout in fsys (its os.Root's FS) and
// says how to build it.
func plan(fsys fs.FS, req Request, haveBuildKit bool) (*buildPlan, error) {
	stack, err := detect(fsys, req.Stack, req.Dockerfile)
	if err != nil {
		return nil, err
	}
	var p *buildPlan
	switch stack {
	case platformv1alpha1.StackDockerfile:
		if !haveBuildKit {
			return nil, ErrNoBuildKit
		}
		df := req.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if !fs.ValidPath(df) {
			return nil, fmt.Errorf("invalid Dockerfile path %q", df)
		}
		// BuildKit reads the ignore files next to the Dockerfile itself.
		for _, f := range []string{df + ".dockerignore", ".dockerignore"} {
			if _, err := isFile(fsys, f); err != nil {
				return nil, err
			}
		}
		p = &buildPlan{title: "Dockerfile", dockerfile: df}
	case platformv1alpha1.StackGo:
		p, err = goPlan(fsys)
	case platformv1alpha1.StackNode:
		p, err = nodePlan(fsys)
	case platformv1alpha1.StackPython:
		p, err = pythonPlan(fsys)
	case platformv1alpha1.StackStatic:
		p = &buildPlan{title: "Static site", processes: map[string]string{"web": "bex-static"}}
	case platformv1alpha1.StackProcfile:
		p = &buildPlan{title: "Procfile app"}
	}
	if err != nil {
		return nil, err
	}
	p.stack = stack
	if req.Command != "" {
		p.steps = overrideBuild(p.steps, step{
			title:   "Running the build command",
			argv:    []string{"/bin/sh", "-c", req.Command},
			display: req.Command,
		})
	}
	p.env = append([]string{"PATH=" + imagePath(p.stack)}, p.env...)
	return p, nil
}

// overrideBuild replaces the stack's build step (the one marked by a title
// starting with "Building") with s, or appends s when the stack has none.
func overrideBuild(steps []step, s step) []step {
	out := make([]step, 0, len(steps)+1)
	replaced := false
	for _, st := range steps {
		if !replaced && strings.HasPrefix(st.title, "Building") {
			out = append(out, s)
			replaced = true
			continue
		}
		out = append(out, st)
	}
	if !replaced {
		out = append(out, s)
	}
	return out
}

// defaultPath is the usual PATH of a Linux image.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func imagePath(stack platformv1alpha1.Stack) string {
	switch stack {
	case platformv1alpha1.StackNode:
		return "/app/node_modules/.bin:/app/bin:" + defaultPath
	case platformv1alpha1.StackPython:
		return "/app/.venv/bin:/app/bin:" + defaultPath
	default:
		return "/app/bin:" + defaultPath
	}
}

func goPlan(fsys fs.FS) (*buildPlan, error) {
	env := []string{"CGO_ENABLED=0"}
	vendored, err := isFile(fsys, "vendor/modules.txt")
	if err != nil {
		return nil, err
	}
	if vendored {
		// A vendored app builds from its vendor directory, offline.
		env = append(env, "GOFLAGS=-mod=vendor")
	}
	return &buildPlan{
		title: "Go app",
		steps: []step{{
			title: "Building with go build",
			argv:  []string{"go", "build", "-o", "bin/app", "."},
			env:   env,
		}},
		processes: map[string]string{"web": "./bin/app"},
	}, nil
}

// packageJSON is what the Node stack reads from package.json.
type packageJSON struct {
	Main            string            `json:"main"`
	Scripts         map[string]string `json:"scripts"`
	Dependencies    map[string]any    `json:"dependencies"`
	DevDependencies map[string]any    `json:"devDependencies"`
}

func nodePlan(fsys fs.FS) (*buildPlan, error) {
	b, err := readFile(fsys, "package.json")
	if err != nil {
		return nil, err
	}
	var pkg packageJSON
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("package.json is not valid JSON: %w", err)
	}
	p := &buildPlan{title: "Node.js app", env: []string{"NODE_ENV=production"}, processes: map[string]string{}}
	if len(pkg.Dependencies)+len(pkg.DevDependencies) > 0 {
		install := step{title: "Installing dependencies with npm install", argv: []string{"npm", "install", "--include=dev", "--no-progress"}}
		locked, err := anyFile(fsys, []string{"package-lock.json", "npm-shrinkwrap.json"})
		if err != nil {
			return nil, err
		}
		if locked {
			install = step{title: "Installing dependencies with npm ci", argv: []string{"npm", "ci", "--include=dev", "--no-progress"}}
		}
		p.steps = append(p.steps, install)
	} else {
		p.steps = append(p.steps, step{title: "No dependencies to install", fn: func(*workspace) error { return nil }})
	}
	if _, ok := pkg.Scripts["build"]; ok {
		p.steps = append(p.steps, step{title: "Building with npm run build", argv: []string{"npm", "run", "build"}})
	}
	if len(pkg.DevDependencies) > 0 {
		p.steps = append(p.steps, step{title: "Pruning devDependencies", argv: []string{"npm", "prune", "--omit=dev", "--no-progress"}})
	}
	switch {
	case pkg.Scripts["start"] != "":
		p.processes["web"] = "npm start"
	case pkg.Main != "":
		p.processes["web"] = "node " + shellQuote(pkg.Main)
	default:
		web, err := firstFile(fsys, "server.js", "index.js")
		if err != nil {
			return nil, err
		}
		if web != "" {
			p.processes["web"] = "node " + web
		}
	}
	return p, nil
}

func pythonPlan(fsys fs.FS) (*buildPlan, error) {
	p := &buildPlan{
		title:     "Python app",
		env:       []string{"VIRTUAL_ENV=/app/.venv", "PYTHONUNBUFFERED=1"},
		processes: map[string]string{},
	}
	// --copies: a venv of symlinks would point outside the app, which an
	// image must not. pip stays out of the venv: the toolchain's own pip
	// installs into it (--python, pip 22.3 and later), which spares each
	// build ensurepip's copy of pip, most of a Python build's CPU when it
	// installs little (1.3 s against 4.3 s of CPU for one small wheel).
	venv := step{title: "Creating a virtualenv", argv: []string{"python3", "-m", "venv", "--copies", "--without-pip", ".venv"}}
	pip := []string{"python3", "-m", "pip", "--python", ".venv/bin/python", "install", "--no-input"}
	hasReqs, err := isFile(fsys, "requirements.txt")
	if err != nil {
		return nil, err
	}
	var reqs []byte
	if hasReqs {
		if reqs, err = readFile(fsys, "requirements.txt"); err != nil {
			return nil, err
		}
	}
	switch {
	case hasReqs && !hasRequirements(reqs):
		p.steps = append(p.steps, venv, step{title: "No requirements to install", fn: func(*workspace) error { return nil }})
	case hasReqs:
		p.steps = append(p.steps, venv, step{
			title:   "Installing requirements with pip",
			argv:    append(pip, "-r", "requirements.txt"),
			display: "pip install -r requirements.txt",
			hint:    pipHint,
		})
	default:
		p.steps = append(p.steps, venv, step{
			title:   "Installing the project with pip",
			argv:    append(pip, "."),
			display: "pip install .",
			hint:    pipHint,
		})
	}
	p.steps = append(p.steps, step{title: "Making the virtualenv relocatable", fn: relocateVenv})
	web, err := firstFile(fsys, "app.py", "main.py")
	if err != nil {
		return nil, err
	}
	if web != "" {
		p.processes["web"] = "python " + web
	}
	return p, nil
}

// firstFile returns the first of files that is a regular file in fsys, or
// "" when none is.
func firstFile(fsys fs.FS, files ...string) (string, error) {
	for _, f := range files {
		ok, err := isFile(fsys, f)
		if err != nil || ok {
			return f, err
		}
	}
	return "", nil
}

// hasRequirements reports whether a requirements file names anything.
func hasRequirements(b []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			return true
		}
	}
	return sc.Err() != nil
}

// pipHint explains pip failures that come from an unreachable index.
func pipHint(tail string) string {
	for _, s := range []string{"NewConnectionError", "Failed to establish a new connection", "Network is unreachable",
		"Temporary failure in name resolution", "Connection refused", "ConnectTimeoutError", "Read timed out",
		"ProxyError", "SSLError"} {
		if strings.Contains(tail, s) {
			return "pip could not reach its package index (" + pipIndex() + "): point the builder's PIP_INDEX_URL at a reachable index or mirror, or vendor the packages"
		}
	}
	if strings.Contains(tail, "No matching distribution found") {
		return "pip found no matching distribution on its package index (" + pipIndex() + "); if the index is unreachable from the builder, set PIP_INDEX_URL to a mirror"
	}
	return ""
}

func pipIndex() string {
	if v := os.Getenv("PIP_INDEX_URL"); v != "" {
		return v
	}
	return "https://pypi.org/simple"
}

// relocateVenv rewrites the absolute interpreter paths pip writes into the
// venv's scripts, so that they work wherever the app is unpacked: the
// image's PATH starts with the venv's bin directory.
func relocateVenv(w *workspace) error {
	const rel = ".venv/bin"
	// The scripts name the venv's python where the steps made it.
	app := w.app
	if w.stepApp != "" {
		app = w.stepApp
	}
	bin := filepath.Join(app, filepath.FromSlash(rel))
	entries, err := fs.ReadDir(w.tree.FS(), rel)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := path.Join(rel, e.Name())
		b, err := w.tree.ReadFile(p)
		if err != nil {
			return err
		}
		if fixed, ok := relocateScript(b, bin); ok {
			fi, err := w.tree.Lstat(p)
			if err != nil {
				return err
			}
			if err := w.tree.WriteFile(p, fixed, fi.Mode().Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}

// relocateScript replaces a script's interpreter line naming a Python of
// venvBin (or pip's /bin/sh trampoline for long paths) with one that finds
// python on PATH.
func relocateScript(b []byte, venvBin string) ([]byte, bool) {
	const env = "#!/usr/bin/env python3"
	lines := strings.SplitN(string(b), "\n", 4)
	if len(lines) >= 1 && strings.HasPrefix(lines[0], "#!"+venvBin+"/python") {
		lines[0] = env
		return []byte(strings.Join(lines, "\n")), true
	}
	if len(lines) >= 4 && lines[0] == "#!/bin/sh" && strings.HasPrefix(lines[1], "'''exec' ") && strings.Contains(lines[1], venvBin+"/python") && lines[2] == "' '''" {
		return []byte(env + "\n" + lines[3]), true
	}
	return b, false
}

// shellQuote quotes s for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
