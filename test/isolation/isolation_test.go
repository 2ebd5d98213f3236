package isolation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"bex.co/bex/test/platformtest"
)

// TestHostileTenant runs the attack app on two platforms at once: in its
// sandbox every attack is blocked; with --unsafe-no-sandbox the file
// attacks succeed, so the suite fails when the sandbox is off.
func TestHostileTenant(t *testing.T) {
	began := time.Now()
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex", "bex-static")
	t.Logf("binaries built in %s", time.Since(began).Round(time.Second))
	t.Run("sandboxed", func(t *testing.T) {
		t.Parallel()
		sandboxed(t, bin)
	})
	t.Run("sandbox off lets the attacks through", func(t *testing.T) {
		t.Parallel()
		sandboxOff(t, bin)
	})
}

// sandboxed runs every attack from inside the attack app's sandbox, and
// from a build step's, and asserts each one was blocked, with its reason,
// and that the platform and the victim's app still answer.
func sandboxed(t *testing.T, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	s := start(ctx, t, bin)
	p := s.plan(t)

	for _, group := range []string{"files", "network", "exhaust"} {
		t.Run(group, func(t *testing.T) {
			requireBlocked(t, "attack", s.attack(t, group, p))
			s.platformAnswers(t)
		})
	}

	t.Run("a one-off run is in the same sandbox", func(t *testing.T) {
		q := p
		q.Groups = []string{"network"}
		plan, err := json.Marshal(q)
		must(t, err)
		out, err := s.a.bexIn(string(plan), "run", "-i", attackApp, "--", "sh", "-c", "cat > /tmp/plan.json && exec /app/bin/app build /tmp/plan.json")
		rs := reportOf(t, out)
		if err != nil || len(rs) == 0 {
			t.Fatalf("bex run of the network attacks: %v\n%s", err, out)
		}
		reportHas(t, rs, "connect to another tenant's instance directly", "connect to the platform's api on 127.0.0.1")
		requireBlocked(t, "attack from a run", rs)
		s.platformAnswers(t)
	})

	t.Run("memory past the limit kills the instance, which restarts on the same release", func(t *testing.T) {
		before, err := s.a.whoami(attackApp)
		must(t, err)
		code, body, err := s.a.call(attackApp, http.MethodGet, "/oom", nil)
		if err == nil && code == http.StatusOK {
			t.Fatalf("the app allocated 1 GiB under a 512 MiB limit and lived: %s", body)
		}
		t.Logf("GET /oom: %d %v %s", code, err, body)
		platformtest.Eventually(t, 12*time.Minute, "the attack app to answer again after it was killed", func(context.Context) error {
			w, err := s.a.whoami(attackApp)
			if err == nil && w.Boot == before.Boot {
				return fmt.Errorf("it answers from boot %q still, the one before /oom", w.Boot)
			}
			return err
		})
		var releases []json.RawMessage
		must(t, json.Unmarshal([]byte(s.a.mustBex(t, "releases", attackApp, "-o", "json")), &releases))
		if len(releases) != 1 {
			t.Errorf("after the restart %s has %d releases, want the one it had", attackApp, len(releases))
		}
		if logs := s.a.mustBex(t, "logs", attackApp); !strings.Contains(logs, "memory limit") {
			t.Errorf("the app's logs do not say it went past its memory limit:\n%s", logs)
		}
		s.platformAnswers(t)
	})

	t.Run("a stack file linking to the operator token fails the push without quoting it", func(t *testing.T) {
		token, err := os.ReadFile(filepath.Join(s.state, "operator-token"))
		must(t, err)
		secret := strings.TrimSpace(string(token))
		s.a.mustBex(t, "apps", "create", "leak")
		abs := filepath.Join(s.state, "operator-token")
		rel := strings.TrimPrefix(abs, "/")
		// A chain whose every link reads as inside: a/up -> .. is the
		// checkout, l1 -> a/up/.. its parent, l2 -> l1/.. the one above, …;
		// the checkout is <state>/builds/builds/<build>/app, so l4 is the
		// state directory.
		chain := map[string]string{"a/up": "..", "l1": "a/up/..", "Procfile": "l4/operator-token"}
		for i := 2; i <= 4; i++ {
			chain[fmt.Sprintf("l%d", i)] = fmt.Sprintf("l%d/..", i-1)
		}
		for _, c := range []struct {
			shape string
			links map[string]string
			names string // the file the error must name, if one
		}{
			{"Procfile -> " + abs, map[string]string{"Procfile": abs}, "Procfile"},
			{"Procfile -> 40 × ../ then the token", map[string]string{"Procfile": strings.Repeat("../", 40) + rel}, "Procfile"},
			{"go.mod -> " + abs, map[string]string{"go.mod": abs}, "go.mod"},
			{"Procfile -> l4/operator-token through a chain of links, each inside on its own", chain, ""},
		} {
			tree := repo(t, "attack")
			for name, target := range c.links {
				path := filepath.Join(tree, name)
				must(t, os.MkdirAll(filepath.Dir(path), 0o755))
				if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				must(t, os.Symlink(target, path))
			}
			platformtest.Git(t, tree, "add", "-A")
			platformtest.Git(t, tree, "commit", "-q", "--amend", "-m", "links out")
			out, err := s.a.tryPush("leak", tree)
			t.Logf("push of %s: %v\n%s", c.shape, err, out)
			if err == nil || strings.Contains(out, "Released") {
				t.Errorf("a push of %s was released", c.shape)
			}
			if strings.Contains(out, secret) {
				t.Errorf("the push output of %s holds the operator token", c.shape)
			}
			if !strings.Contains(out, "leads outside the repository") || !strings.Contains(out, c.names) {
				t.Errorf("the push output of %s does not say that %s leads outside the repository", c.shape, c.names)
			}
		}
		s.platformAnswers(t)
	})

	t.Run("from a build step", func(t *testing.T) { s.buildAttacks(t, p) })
}

// sandboxOff runs the attack app on a platform started with
// --unsafe-no-sandbox: the same attacks read the state directory, the
// operator token and the victim's secret, and reach the victim's instance;
// from a build step they read the victim's repository and build caches.
func sandboxOff(t *testing.T, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := start(ctx, t, bin, "--unsafe-no-sandbox")
	p := s.plan(t)

	var got []result
	for _, group := range []string{"files", "network", "exhaust"} {
		got = append(got, s.attack(t, group, p)...)
	}
	for _, want := range []string{
		"read the state directory (" + s.state + ")",
		"read the operator token (" + filepath.Join(s.state, "operator-token") + ")",
		"read other processes' environments",
		"connect to another tenant's instance directly",
	} {
		i := slices.IndexFunc(got, func(r result) bool { return strings.HasPrefix(r.Attempt, want) })
		switch {
		case i < 0:
			t.Errorf("the report has no attempt %q", want)
		case got[i].Outcome != "ok":
			t.Errorf("without the sandbox %s did not succeed: %s", got[i].Attempt, got[i].Detail)
		}
	}
	t.Run("from a build step", func(t *testing.T) { s.buildAttacksGetThrough(t, p) })
}
