package isolation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"bex.co/bex/test/platformtest"
)

// buildApp is the attacker's app whose build script is the attack
// (testdata/buildattack).
const buildApp = "buildattack"

// buildDisk is the size of each build's work directory and of each
// tenant's build caches on the suite's platforms: the build attacks fill
// them, so they are small.
const buildDisk = 256 << 20

// buildMemory is the memory limit of a build step (build.Options'
// default), which the build attacks go past.
const buildMemory = 2 << 30

// buildDiskFlags give the suite's platforms their small build disks.
func buildDiskFlags() []string {
	return []string{fmt.Sprintf("--build-disk=%dMi", buildDisk>>20), fmt.Sprintf("--build-cache-disk=%dMi", buildDisk>>20)}
}

// buildAttackRepo is a git repository of testdata/buildattack with
// testdata/attack in attack/: a Node app whose build script compiles the
// attack and runs it on plan.json, which pushBuild writes.
func buildAttackRepo(t *testing.T) string {
	t.Helper()
	dir := repo(t, "buildattack")
	copyFiles(t, filepath.Join("testdata", "attack"), filepath.Join(dir, "attack"))
	return dir
}

// buildPlan is p for a build step of the attacker running groups: it
// adds the victim's build caches to the files, and sizes the exhaust
// group past a build step's limits (2 GiB of memory, 1024 pids, 16,384
// open files, the two disks).
func (s *scene) buildPlan(p plan, groups ...string) plan {
	caches := filepath.Join(s.state, "builds", "cache")
	p.Files = append(slices.Clone(p.Files),
		target{Name: "the victim's build caches", Path: platformtest.TenantBuildCache(s.state, victim)},
		target{Name: "the tenants' build cache disks", Path: filepath.Join(caches, "disks"), Holds: victim + ".ext4"},
		target{Name: "the victim's build cache disk", Path: filepath.Join(caches, "disks", victim+".ext4")},
	)
	p.Exhaust = sizes{
		MemoryMiB: buildMemory>>20 + 256,
		Processes: 1100,
		Files:     20000,
		FillMiB:   buildDisk>>20 + 128,
		Fill: []target{
			{Name: "the build's work directory", Path: "fill"},
			{Name: "the tenant's build caches", Path: filepath.Join(platformtest.TenantBuildCache(s.state, attacker), "fill")},
		},
	}
	p.Groups = groups
	return p
}

// pushBuild commits p as plan.json of the build attack's repository in
// dir and pushes it as the attacker: the push's output, and the attempts
// its build reported there.
func (s *scene) pushBuild(t *testing.T, dir string, p plan) (string, []result, error) {
	t.Helper()
	b, err := json.MarshalIndent(p, "", "  ")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "plan.json"), b, 0o644))
	platformtest.Git(t, dir, "add", "-A")
	platformtest.Git(t, dir, "commit", "-q", "-m", "attack from the build: "+strings.Join(p.Groups, ", "))
	out, err := s.a.tryPush(buildApp, dir)
	return out, reportOf(t, out), err
}

// reportOf returns the attempts that "attack build" reported in out, one
// JSON line each wherever the line starts (the push output prefixes
// them), and logs each.
func reportOf(t *testing.T, out string) []result {
	t.Helper()
	var rs []result
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, `{"attempt":`)
		if i < 0 {
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(strings.TrimSpace(line[i:])), &r); err != nil {
			t.Errorf("the report line %q: %v", line, err)
			continue
		}
		// A failed build quotes the last lines of its output again.
		if slices.Contains(rs, r) {
			continue
		}
		t.Logf("%-7s %s: %s", r.Outcome, r.Attempt, r.Detail)
		rs = append(rs, r)
	}
	return rs
}

// reportHas fails t for each of attempts (prefixes) that rs lacks, and
// returns those found.
func reportHas(t *testing.T, rs []result, attempts ...string) []result {
	t.Helper()
	var found []result
	for _, want := range attempts {
		i := slices.IndexFunc(rs, func(r result) bool { return strings.HasPrefix(r.Attempt, want) })
		if i < 0 {
			t.Errorf("the report has no attempt %q", want)
			continue
		}
		found = append(found, rs[i])
	}
	return found
}

// buildAttacks runs the attacks from a build step of the attacker: the
// Node stack's npm run build is the attacker's own script. Every attempt
// must be blocked with its reason and the build go on to a release; a
// build that fills its disk, or goes past its memory, fails saying so;
// afterwards the platform, the victim and the attacker's next push work.
func (s *scene) buildAttacks(t *testing.T, p plan) {
	s.a.mustBex(t, "apps", "create", buildApp)
	dir := buildAttackRepo(t)
	state := func(rel ...string) string { return filepath.Join(append([]string{s.state}, rel...)...) }

	t.Run("files, network and limits", func(t *testing.T) {
		out, rs, err := s.pushBuild(t, dir, s.buildPlan(p, "files", "network", "exhaust"))
		if err != nil || !strings.Contains(out, "Released v1") {
			t.Fatalf("the build that attacks was not released: %v\n%s", err, out)
		}
		reportHas(t, rs,
			"read the state directory ("+state()+")",
			"read the operator token ("+state("operator-token")+")",
			"read the victim's git repository ("+state("git", victim)+")",
			"read the victim's build caches ("+platformtest.TenantBuildCache(s.state, victim)+")",
			"read the victim's build cache disk (",
			"read other processes' environments",
			"connect to the private Postgres on 127.0.0.1",
			"connect to etcd (client) on 127.0.0.1",
			"connect to the platform's api on 127.0.0.1",
			"connect to the platform's registry on 127.0.0.1",
			"connect to another tenant's instance directly",
			fmt.Sprintf("allocate %d MiB in a child process", buildMemory>>20+256),
			"start 1100 processes",
			"open 20000 files",
			"fill the build's work directory (",
			"fill the tenant's build caches (",
		)
		requireBlocked(t, "attack from the build", rs)
		s.platformAnswers(t)
	})

	t.Run("a build that fills its disk fails saying so", func(t *testing.T) {
		out, rs, err := s.pushBuild(t, dir, s.buildPlan(p, "fill-disk"))
		if err == nil || strings.Contains(out, "Released") {
			t.Errorf("the build that filled its disk was released:\n%s", out)
		}
		want := fmt.Sprintf("the build wrote more than %d MiB to its work directory", buildDisk>>20)
		if !strings.Contains(out, want) {
			t.Errorf("the push output does not say %q:\n%s", want, out)
		}
		for _, r := range reportHas(t, rs, "fill the build's work directory and keep it") {
			if r.Outcome != "blocked" {
				t.Errorf("%s: %s", r.Attempt, r.Detail)
			}
		}
		s.platformAnswers(t)
	})

	t.Run("a build past its memory limit fails saying so", func(t *testing.T) {
		out, rs, err := s.pushBuild(t, dir, s.buildPlan(p, "oom"))
		if err == nil || strings.Contains(out, "Released") || len(rs) > 0 {
			t.Errorf("the build that allocated %d MiB under a %d MiB limit lived:\n%s", buildMemory>>20+256, buildMemory>>20, out)
		}
		want := fmt.Sprintf("killed for going past the build's memory limit (%d MiB)", buildMemory>>20)
		if !strings.Contains(out, want) {
			t.Errorf("the push output does not say %q:\n%s", want, out)
		}
		s.platformAnswers(t)
	})

	t.Run("the attacker's next push builds and serves", func(t *testing.T) {
		must(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "buildattack", "version": "1.0.0", "private": true}`+"\n"), 0o644))
		platformtest.Git(t, dir, "commit", "-q", "-am", "no build script")
		out, err := s.a.tryPush(buildApp, dir)
		if err != nil || !strings.Contains(out, "Released v2") {
			t.Fatalf("the attacker's push after the attacks: %v\n%s", err, out)
		}
		code, body, err := s.a.call(buildApp, http.MethodGet, "/", nil)
		if err != nil || code != http.StatusOK || string(body) != "built" {
			t.Errorf("GET / of %s: %d %v %q", buildApp, code, err, body)
		}
		s.platformAnswers(t)
	})
}

// buildAttacksGetThrough runs the file attacks from a build step of the
// attacker on a platform without sandboxes: they read the state
// directory, the operator token, the victim's repository and build caches.
func (s *scene) buildAttacksGetThrough(t *testing.T, p plan) {
	s.a.mustBex(t, "apps", "create", buildApp)
	out, rs, err := s.pushBuild(t, buildAttackRepo(t), s.buildPlan(p, "files"))
	if err != nil || !strings.Contains(out, "Released v1") {
		t.Fatalf("the build that attacks was not released: %v\n%s", err, out)
	}
	for _, r := range reportHas(t, rs,
		"read the state directory ("+s.state+")",
		"read the operator token ("+filepath.Join(s.state, "operator-token")+")",
		"read the victim's git repository ("+filepath.Join(s.state, "git", victim)+")",
		"read the victim's build caches ("+platformtest.TenantBuildCache(s.state, victim)+")",
	) {
		if r.Outcome != "ok" {
			t.Errorf("without the sandbox %s from the build did not succeed: %s", r.Attempt, r.Detail)
		}
	}
}
