package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"bex.co/bex/internal/store"
)

func ptr[T any](v T) *T { return &v }

func TestReleases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")

	b, err := s.CreateBuild(ctx, store.NewBuild{TenantID: acme.ID, App: "web", Commit: "abc1234def"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildSucceeded, Image: "r/acme/web@sha256:01"}); err != nil {
		t.Fatal(err)
	}
	config := map[string]store.ConfigValue{
		"GREETING":     {Value: ptr("hello")},
		"EMPTY":        {Value: ptr("")},
		"DATABASE_URL": {SecretKeyRef: &store.SecretRef{Name: "web-env", Key: "DATABASE_URL"}},
	}
	v1, err := s.CreateRelease(ctx, store.NewRelease{
		TenantID: acme.ID, App: "web", BuildID: b.ID, Image: "r/acme/web@sha256:01",
		Config: config, Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git:dev",
	})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Number != 1 || v1.BuildID != b.ID || *v1.Config["GREETING"].Value != "hello" || *v1.Config["EMPTY"].Value != "" ||
		v1.Config["DATABASE_URL"].SecretKeyRef.Name != "web-env" || v1.Config["DATABASE_URL"].Value != nil {
		t.Fatalf("v1 = %+v", v1)
	}
	v2, err := s.CreateRelease(ctx, store.NewRelease{
		TenantID: acme.ID, App: "web", Image: "r/acme/web@sha256:02", Kind: store.ReleaseKindDeploy, Description: "Deploy 0000002", CreatedBy: "git:dev",
	})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Number != 2 || v2.BuildID != "" || len(v2.Config) != 0 {
		t.Errorf("v2 = %+v", v2)
	}

	target, err := s.RollbackTarget(ctx, acme.ID, "web", 0)
	if err != nil || target != 1 {
		t.Fatalf("RollbackTarget(latest) = %d, %v, want 1", target, err)
	}
	v3, err := s.CreateRollbackRelease(ctx, acme.ID, "web", target, "token:laptop")
	if err != nil {
		t.Fatal(err)
	}
	if v3.Number != 3 || v3.Image != v1.Image || v3.BuildID != b.ID || v3.Description != "Rollback to v1" ||
		v3.Kind != store.ReleaseKindRollback || v3.RollbackTo != 1 ||
		*v3.Config["GREETING"].Value != "hello" || v3.CreatedBy != "token:laptop" {
		t.Errorf("v3 = %+v, want a copy of v1", v3)
	}
	if target, err := s.RollbackTarget(ctx, acme.ID, "web", 3); err != nil || target != 2 {
		t.Errorf("RollbackTarget(3) = %d, %v, want 2", target, err)
	}
	if _, err := s.RollbackTarget(ctx, acme.ID, "web", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RollbackTarget(1): err = %v, want ErrNotFound", err)
	}

	list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int
	for _, r := range list {
		numbers = append(numbers, r.Number)
	}
	if fmt.Sprint(numbers) != "[3 2 1]" {
		t.Errorf("ListReleases = %v, want [3 2 1]", numbers)
	}
	if latest, err := s.LatestRelease(ctx, acme.ID, "web"); err != nil || latest.Number != 3 {
		t.Errorf("LatestRelease = %+v, %v", latest, err)
	}
	if got, err := s.GetRelease(ctx, acme.ID, "web", 2); err != nil || got.ID != v2.ID {
		t.Errorf("GetRelease(2) = %+v, %v", got, err)
	}
	if got, err := s.CurrentRelease(ctx, acme.ID, "web", 2); err != nil || got.ID != v2.ID {
		t.Errorf("CurrentRelease(2) = %+v, %v, want v2", got, err)
	}
	if got, err := s.CurrentRelease(ctx, acme.ID, "web", 0); err != nil || got.Number != 3 {
		t.Errorf("CurrentRelease(0) = %+v, %v, want the latest", got, err)
	}

	// Another tenant sees nothing of acme's.
	if _, err := s.GetRelease(ctx, other.ID, "web", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other tenant's GetRelease: err = %v, want ErrNotFound", err)
	}
	if list, err := s.ListReleases(ctx, other.ID, "web", store.ReleaseFilter{}); err != nil || len(list) != 0 {
		t.Errorf("other tenant's ListReleases = %v, %v", list, err)
	}
	if _, err := s.CreateRelease(ctx, store.NewRelease{
		TenantID: other.ID, App: "web", Kind: store.ReleaseKindDeploy, BuildID: b.ID, Image: "x@sha256:1", Description: "steal", CreatedBy: "x",
	}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("release of another tenant's build: err = %v, want ErrNotFound", err)
	}

	deploy := store.ReleaseKindDeploy
	for _, bad := range []store.NewRelease{
		{TenantID: acme.ID, Kind: deploy, Image: "x@sha256:1", Description: "d", CreatedBy: "c"},
		{TenantID: acme.ID, App: "web", Kind: deploy, Description: "d", CreatedBy: "c"},
		{TenantID: acme.ID, App: "web", Kind: deploy, Image: "x@sha256:1", CreatedBy: "c"},
		{TenantID: acme.ID, App: "web", Kind: deploy, Image: "x@sha256:1", Description: "d"},
		{TenantID: acme.ID, App: "web", Kind: deploy, Image: "x@sha256:1", Description: "d", CreatedBy: "c",
			Config: map[string]store.ConfigValue{"BOTH": {Value: ptr("v"), SecretKeyRef: &store.SecretRef{Name: "s", Key: "k"}}}},
		{TenantID: acme.ID, App: "web", Kind: deploy, Image: "x@sha256:1", Description: "d", CreatedBy: "c",
			Config: map[string]store.ConfigValue{"NEITHER": {}}},
	} {
		if _, err := s.CreateRelease(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateRelease(%+v): err = %v, want ErrInvalid", bad, err)
		}
	}
	// Refused releases took no number.
	if v4, err := s.CreateRelease(ctx, store.NewRelease{TenantID: acme.ID, App: "web", Kind: deploy, Image: "x@sha256:4", Description: "d", CreatedBy: "c"}); err != nil || v4.Number != 4 {
		t.Errorf("release after refused ones = %+v, %v, want v4", v4, err)
	}
}

// TestReleaseKinds: a release's kind, and a rollback's target, are read
// back as they were recorded by every read; a release without a kind, of
// an unknown kind, a rollback to nothing and another kind that names a
// release to roll back to are refused and take no number.
func TestReleaseKinds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	img := "r/acme/web@sha256:01"
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234"},
		{Kind: store.ReleaseKindConfig, Description: "Set FOO"},
		{Kind: store.ReleaseKindRollback, RollbackTo: 1, Description: "Rollback to v1"},
	} {
		nr.TenantID, nr.App, nr.Image, nr.CreatedBy = acme.ID, "web", img, "dev"
		r, err := s.CreateRelease(ctx, nr)
		if err != nil {
			t.Fatalf("CreateRelease(%s): %v", nr.Kind, err)
		}
		if r.Kind != nr.Kind || r.RollbackTo != nr.RollbackTo {
			t.Errorf("CreateRelease(%s, to v%d) = kind %q, to v%d", nr.Kind, nr.RollbackTo, r.Kind, r.RollbackTo)
		}
	}
	v4, err := s.CreateRollbackRelease(ctx, acme.ID, "web", 2, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if v4.Kind != store.ReleaseKindRollback || v4.RollbackTo != 2 {
		t.Errorf("CreateRollbackRelease(2) = kind %q, to v%d", v4.Kind, v4.RollbackTo)
	}
	want := "4 rollback 2, 3 rollback 1, 2 config 0, 1 deploy 0"
	list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range list {
		one, err := s.GetRelease(ctx, acme.ID, "web", r.Number)
		if err != nil || one.Kind != r.Kind || one.RollbackTo != r.RollbackTo {
			t.Errorf("GetRelease(%d) = kind %q, to v%d, %v; listed as %q, to v%d", r.Number, one.Kind, one.RollbackTo, err, r.Kind, r.RollbackTo)
		}
		got = append(got, fmt.Sprintf("%d %s %d", r.Number, r.Kind, r.RollbackTo))
	}
	if strings.Join(got, ", ") != want {
		t.Errorf("ListReleases = %s, want %s", strings.Join(got, ", "), want)
	}

	for _, tc := range []struct {
		nr      store.NewRelease
		errPart string
		is      error
	}{
		{store.NewRelease{}, "it does not say its kind (one of deploy, rollback, config)", store.ErrInvalid},
		{store.NewRelease{Kind: "restart"}, `unknown kind "restart" (want one of deploy, rollback, config)`, store.ErrInvalid},
		{store.NewRelease{Kind: "Deploy"}, `unknown kind "Deploy"`, store.ErrInvalid},
		{store.NewRelease{Kind: store.ReleaseKindRollback}, "a rollback names the release it runs again", store.ErrInvalid},
		{store.NewRelease{Kind: store.ReleaseKindConfig, RollbackTo: 1}, "a config release rolls back to no release (v1 given)", store.ErrInvalid},
		{store.NewRelease{Kind: store.ReleaseKindRollback, RollbackTo: 9}, "release v9 of web to roll back to", store.ErrNotFound},
	} {
		nr := tc.nr
		nr.TenantID, nr.App, nr.Image, nr.Description, nr.CreatedBy = acme.ID, "web", img, "d", "dev"
		if _, err := s.CreateRelease(ctx, nr); !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.errPart) {
			t.Errorf("CreateRelease(kind %q, to v%d): err = %v, want %v saying %q", nr.Kind, nr.RollbackTo, err, tc.is, tc.errPart)
		}
	}
	// The database refuses them too, whatever writes the row.
	for _, stmt := range []string{
		"INSERT INTO releases (tenant_id, app, number, kind, image, created_by) VALUES ($1, 'web', 90, 'restart', 'x@sha256:1', 'dev')",
		"INSERT INTO releases (tenant_id, app, number, image, created_by) VALUES ($1, 'web', 91, 'x@sha256:1', 'dev')",
		"INSERT INTO releases (tenant_id, app, number, kind, image, created_by) VALUES ($1, 'web', 92, 'rollback', 'x@sha256:1', 'dev')",
		"INSERT INTO releases (tenant_id, app, number, kind, rollback_to, image, created_by) VALUES ($1, 'web', 93, 'deploy', 1, 'x@sha256:1', 'dev')",
		"INSERT INTO releases (tenant_id, app, number, kind, rollback_to, image, created_by) VALUES ($1, 'web', 94, 'rollback', 94, 'x@sha256:1', 'dev')",
		"INSERT INTO releases (tenant_id, app, number, kind, rollback_to, image, created_by) VALUES ($1, 'other', 95, 'rollback', 1, 'x@sha256:1', 'dev')",
	} {
		if _, err := s.Pool().Exec(ctx, stmt, acme.ID); err == nil {
			t.Errorf("%s: the database accepted it", stmt)
		}
	}
	if latest, err := s.LatestRelease(ctx, acme.ID, "web"); err != nil || latest.Number != 4 {
		t.Errorf("after the refused releases the latest is %d, %v, want v4", latest.Number, err)
	}
}

// TestListReleasesByKind: a kind filter keeps the releases of those kinds
// only, newest first, the limit counting only them; no filter lists them
// all; before pages back from a release; an unknown kind is refused;
// another tenant sees none.
func TestListReleasesByKind(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy},
		{Kind: store.ReleaseKindConfig},
		{Kind: store.ReleaseKindDeploy},
		{Kind: store.ReleaseKindRollback, RollbackTo: 1},
		{Kind: store.ReleaseKindConfig},
		{Kind: store.ReleaseKindDeploy},
	} {
		nr.TenantID, nr.App, nr.Image, nr.Description, nr.CreatedBy = acme.ID, "web", "r/acme/web@sha256:01", "d", "dev"
		if _, err := s.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	numbers := func(rs []store.Release) string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%d %s", r.Number, r.Kind))
		}
		return strings.Join(out, ", ")
	}
	for _, tc := range []struct {
		before, limit int
		kinds         []store.ReleaseKind
		want          string
	}{
		{0, 0, nil, "6 deploy, 5 config, 4 rollback, 3 deploy, 2 config, 1 deploy"},
		{0, 0, []store.ReleaseKind{store.ReleaseKindDeploy}, "6 deploy, 3 deploy, 1 deploy"},
		{0, 0, []store.ReleaseKind{store.ReleaseKindRollback, store.ReleaseKindConfig}, "5 config, 4 rollback, 2 config"},
		{0, 2, []store.ReleaseKind{store.ReleaseKindDeploy}, "6 deploy, 3 deploy"},
		{0, 1, []store.ReleaseKind{store.ReleaseKindConfig}, "5 config"},
		{0, 2, nil, "6 deploy, 5 config"},
		// Pages: each after the last release of the one before.
		{5, 2, nil, "4 rollback, 3 deploy"},
		{3, 2, nil, "2 config, 1 deploy"},
		{1, 2, nil, ""},
		{3, 0, []store.ReleaseKind{store.ReleaseKindDeploy}, "1 deploy"},
		{6, 1, []store.ReleaseKind{store.ReleaseKindConfig, store.ReleaseKindRollback}, "5 config"},
		{100, 1, nil, "6 deploy"},
	} {
		list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{Kinds: tc.kinds, Before: tc.before, Limit: tc.limit})
		if err != nil || numbers(list) != tc.want {
			t.Errorf("ListReleases(before %d, limit %d, kinds %v) = %s, %v, want %s", tc.before, tc.limit, tc.kinds, numbers(list), err, tc.want)
		}
	}
	if list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{Before: -1}); !errors.Is(err, store.ErrInvalid) || list != nil {
		t.Errorf("ListReleases(before -1) = %s, %v, want ErrInvalid", numbers(list), err)
	}
	if list, err := s.ListReleases(ctx, other.ID, "web", store.ReleaseFilter{Kinds: []store.ReleaseKind{store.ReleaseKindDeploy}}); err != nil || len(list) != 0 {
		t.Errorf("another tenant's ListReleases(deploy) = %s, %v, want none", numbers(list), err)
	}
	for _, k := range []store.ReleaseKind{"restart", "Deploy", ""} {
		list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{Kinds: []store.ReleaseKind{store.ReleaseKindDeploy, k}})
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "want one of deploy, rollback, config") || list != nil {
			t.Errorf("ListReleases(deploy, %q) = %s, %v, want ErrInvalid naming the kinds", k, numbers(list), err)
		}
	}
}

// TestParseReleaseKinds: a comma-separated list of kinds reads as a
// filter, blanks and repeats ignored; an unknown or empty kind is refused
// with the kinds named.
func TestParseReleaseKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want, errPart string
	}{
		{"", "", ""},
		{" ", "", ""},
		{"deploy", "deploy", ""},
		{"deploy,rollback", "deploy rollback", ""},
		{" config , deploy,config", "config deploy", ""},
		{"deploys", "", `release kind "deploys": want one of deploy, rollback, config`},
		{"deploy,Rollback", "", `release kind "Rollback": want one of deploy, rollback, config`},
		{"deploy,,config", "", `an empty kind; give kinds separated by commas, from deploy, rollback, config`},
		{"deploy,", "", "an empty kind"},
	} {
		kinds, err := store.ParseReleaseKinds(tc.in)
		got := fmt.Sprint(kinds)
		got = strings.Trim(got, "[]")
		switch {
		case tc.errPart == "" && (err != nil || got != tc.want):
			t.Errorf("ParseReleaseKinds(%q) = %s, %v, want %s", tc.in, got, err, tc.want)
		case tc.errPart != "" && (!errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.errPart) || kinds != nil):
			t.Errorf("ParseReleaseKinds(%q) = %s, %v, want ErrInvalid saying %q", tc.in, got, err, tc.errPart)
		}
	}
}

// TestListReleasesByStatus: a status filter keeps the releases that went
// out, or those whose rollout failed, newest first, the limit counting
// only them; it combines with a kind filter and with before; an unknown
// status is refused; another tenant sees none.
func TestListReleasesByStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy},
		{Kind: store.ReleaseKindDeploy, Failure: "web.0 exited during start-up"},
		{Kind: store.ReleaseKindConfig},
		{Kind: store.ReleaseKindConfig, Failure: "web.0 never became healthy"},
		{Kind: store.ReleaseKindRollback, RollbackTo: 1},
		{Kind: store.ReleaseKindDeploy, Failure: "the release phase exited with status 3"},
		{Kind: store.ReleaseKindDeploy},
	} {
		nr.TenantID, nr.App, nr.Image, nr.Description, nr.CreatedBy = acme.ID, "web", "r/acme/web@sha256:01", "d", "dev"
		if _, err := s.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	numbers := func(rs []store.Release) string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%d %s %s", r.Number, r.Kind, r.Status))
		}
		return strings.Join(out, ", ")
	}
	succeeded, failed := store.ReleaseSucceeded, store.ReleaseFailed
	for _, tc := range []struct {
		f    store.ReleaseFilter
		want string
	}{
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed}}, "6 deploy failed, 4 config failed, 2 deploy failed"},
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{succeeded}}, "7 deploy succeeded, 5 rollback succeeded, 3 config succeeded, 1 deploy succeeded"},
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed, succeeded}, Limit: 3}, "7 deploy succeeded, 6 deploy failed, 5 rollback succeeded"},
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed}, Limit: 2}, "6 deploy failed, 4 config failed"},
		// Pages: each after the last release of the one before.
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed}, Before: 4}, "2 deploy failed"},
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{succeeded}, Before: 5, Limit: 1}, "3 config succeeded"},
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed}, Before: 2}, ""},
		// With kinds: both hold.
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed}, Kinds: []store.ReleaseKind{store.ReleaseKindDeploy}}, "6 deploy failed, 2 deploy failed"},
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{succeeded}, Kinds: []store.ReleaseKind{store.ReleaseKindDeploy, store.ReleaseKindConfig}, Before: 7}, "3 config succeeded, 1 deploy succeeded"},
		{store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed}, Kinds: []store.ReleaseKind{store.ReleaseKindRollback}}, ""},
	} {
		list, err := s.ListReleases(ctx, acme.ID, "web", tc.f)
		if err != nil || numbers(list) != tc.want {
			t.Errorf("ListReleases(%+v) = %s, %v, want %s", tc.f, numbers(list), err, tc.want)
		}
	}
	if list, err := s.ListReleases(ctx, other.ID, "web", store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed}}); err != nil || len(list) != 0 {
		t.Errorf("another tenant's ListReleases(failed) = %s, %v, want none", numbers(list), err)
	}
	for _, st := range []store.ReleaseStatus{"pending", "superseded", "Failed", ""} {
		list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{Statuses: []store.ReleaseStatus{failed, st}})
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "want one of succeeded, failed") || list != nil {
			t.Errorf("ListReleases(failed, %q) = %s, %v, want ErrInvalid naming the statuses", st, numbers(list), err)
		}
	}
}

// TestParseReleaseStatuses: a comma-separated list of statuses reads as a
// filter, blanks and repeats ignored; an unknown or empty status is
// refused with the statuses named.
func TestParseReleaseStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want, errPart string
	}{
		{"", "", ""},
		{" ", "", ""},
		{"failed", "failed", ""},
		{" succeeded , failed,succeeded", "succeeded failed", ""},
		{"pending", "", `release status "pending": want one of succeeded, failed`},
		{"failed,Succeeded", "", `release status "Succeeded": want one of succeeded, failed`},
		{"failed,,succeeded", "", `an empty status; give statuses separated by commas, from succeeded, failed`},
		{"failed,", "", "an empty status"},
	} {
		statuses, err := store.ParseReleaseStatuses(tc.in)
		got := strings.Trim(fmt.Sprint(statuses), "[]")
		switch {
		case tc.errPart == "" && (err != nil || got != tc.want):
			t.Errorf("ParseReleaseStatuses(%q) = %s, %v, want %s", tc.in, got, err, tc.want)
		case tc.errPart != "" && (!errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.errPart) || statuses != nil):
			t.Errorf("ParseReleaseStatuses(%q) = %s, %v, want ErrInvalid saying %q", tc.in, got, err, tc.errPart)
		}
	}
}

func TestReleaseNumbersUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	wantDenseNumbers(t, 10, func(i int) (int, error) {
		r, err := s.CreateRelease(ctx, store.NewRelease{
			TenantID: acme.ID, App: "web", Image: fmt.Sprintf("r/acme/web@sha256:%02d", i),
			Kind: store.ReleaseKindDeploy, Description: fmt.Sprintf("Deploy %d", i), CreatedBy: "test",
		})
		return r.Number, err
	})
}

func TestReleasesAreImmutable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	v1, err := s.CreateRelease(ctx, store.NewRelease{TenantID: acme.ID, App: "web", Image: "r/acme/web@sha256:01", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "dev"})
	if err != nil {
		t.Fatal(err)
	}

	for _, stmt := range []string{
		"UPDATE releases SET image = 'evil@sha256:66'",
		"UPDATE releases SET description = 'x' WHERE false",
		"DELETE FROM releases",
		"TRUNCATE releases",
		"DELETE FROM tenants WHERE name = 'acme'",
	} {
		_, err := s.Pool().Exec(ctx, stmt)
		if err == nil {
			t.Errorf("%s: the database accepted it", stmt)
		} else if !strings.Contains(err.Error(), "releases are immutable") && !strings.Contains(err.Error(), "foreign key") {
			t.Errorf("%s: err = %v, want it refused as immutable", stmt, err)
		}
	}
	got, err := s.GetRelease(ctx, acme.ID, "web", 1)
	if err != nil || got.Image != v1.Image || got.Description != v1.Description {
		t.Errorf("after the refused statements v1 = %+v, %v, want it unchanged", got, err)
	}
}

func TestPruneReleases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	for i := 1; i <= 4; i++ {
		if _, err := s.CreateRelease(ctx, store.NewRelease{
			TenantID: acme.ID, App: "web", Image: fmt.Sprintf("r/acme/web@sha256:0%d", i), Kind: store.ReleaseKindDeploy, Description: "Deploy", CreatedBy: "dev",
		}); err != nil {
			t.Fatal(err)
		}
	}
	// v5 runs v1's image again: v1's image stays while v5 is kept.
	if _, err := s.CreateRollbackRelease(ctx, acme.ID, "web", 1, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneReleases(ctx, acme.ID, "web", 0, 5); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PruneReleases(keep 0) = %v, want ErrInvalid", err)
	}

	// Keep 2 (v4, v5) and v2, which serves.
	got, err := s.PruneReleases(ctx, acme.ID, "web", 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int
	for _, r := range got.Releases {
		numbers = append(numbers, r.Number)
	}
	if fmt.Sprint(numbers) != "[1 3]" || fmt.Sprint(got.Images) != "[r/acme/web@sha256:03]" {
		t.Errorf("PruneReleases = releases %v, images %v, want [1 3] and only v3's image", numbers, got.Images)
	}
	again, err := s.PruneReleases(ctx, acme.ID, "web", 2, 2)
	if err != nil || len(again.Releases) != 0 {
		t.Errorf("PruneReleases again = %+v, %v, want nothing new", again, err)
	}

	list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		pruned := r.Number == 1 || r.Number == 3
		if (r.PrunedAt != nil) != pruned || (r.PrunedRetention == 2) != pruned {
			t.Errorf("v%d: prunedAt %v, retention %d, want pruned %v", r.Number, r.PrunedAt, r.PrunedRetention, pruned)
		}
	}
	_, err = s.CreateRollbackRelease(ctx, acme.ID, "web", 3, "dev")
	if want := "release v3 was pruned: the platform keeps the last 2 releases of an app"; err == nil || err.Error() != want || !errors.Is(err, store.ErrInvalid) {
		t.Errorf("rollback to pruned v3: err = %v, want %q (ErrInvalid)", err, want)
	}
	if latest, err := s.LatestRelease(ctx, acme.ID, "web"); err != nil || latest.Number != 5 {
		t.Errorf("after the refused rollback the latest release is %d, %v, want v5", latest.Number, err)
	}
	if _, err := s.CreateRollbackRelease(ctx, acme.ID, "web", 4, "dev"); err != nil {
		t.Errorf("rollback to kept v4: %v", err)
	}
}

func TestPrunedReleasesStayImmutable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	for range 2 {
		if _, err := s.CreateRelease(ctx, store.NewRelease{TenantID: acme.ID, App: "web", Image: "r/acme/web@sha256:01", Kind: store.ReleaseKindDeploy, Description: "Deploy", CreatedBy: "dev"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PruneReleases(ctx, acme.ID, "web", 1, 2); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Even where pruning is allowed, only marking a kept release pruned is.
	if _, err := tx.Exec(ctx, "SELECT set_config('bex.pruning_releases', 'on', true)"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"UPDATE releases SET image = 'evil@sha256:66' WHERE number = 2",
		"UPDATE releases SET pruned_at = now(), pruned_retention = 1, description = 'x' WHERE number = 2",
		"UPDATE releases SET pruned_at = NULL, pruned_retention = NULL WHERE number = 1",
		"UPDATE releases SET pruned_at = now(), pruned_retention = 5 WHERE number = 1",
	} {
		if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "releases are immutable") {
			t.Errorf("%s: err = %v, want it refused as immutable", stmt, err)
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
	}
}
