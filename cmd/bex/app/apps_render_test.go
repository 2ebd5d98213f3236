package app

import (
	"bytes"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

func TestRenderAppInfo(t *testing.T) {
	base := apiclient.App{
		Name: "web", Tenant: "acme", Branch: "main", GitRemote: "http://git.bex.test/acme/web.git", URL: "https://web-acme.apps.bex.test",
		CurrentRelease: 3, Status: "ready", Placed: "pending", CreatedAt: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC),
	}
	head := "Name:       web\nGit remote: http://git.bex.test/acme/web.git\nURL:        https://web-acme.apps.bex.test\nBranch:     main\nRelease:    v3\n"
	for _, tc := range []struct {
		name   string
		change func(*apiclient.App)
		// want is what follows head.
		want string
	}{{
		name:   "not looked at yet",
		change: func(*apiclient.App) {},
		want:   "Status:     ready\nCluster:    pending\n",
	}, {
		name: "placed",
		change: func(a *apiclient.App) {
			a.Placed, a.Cluster, a.Placement = "placed", "alpha", "placed on alpha/workers (score 80, BinPack)"
		},
		want: "Status:     ready\nCluster:    alpha (placed on alpha/workers (score 80, BinPack))\n",
	}, {
		name: "moved",
		change: func(a *apiclient.App) {
			a.Placed, a.Cluster, a.Placement = "placed", "beta", "moved from alpha/workers to beta/workers: alpha is cordoned (annotation scheduling.bex.co/cordoned=true) (score 60, Spread)"
		},
		want: "Status:     ready\nCluster:    beta (moved from alpha/workers to beta/workers: alpha is cordoned (annotation scheduling.bex.co/cordoned=true) (score 60, Spread))\n",
	}, {
		name: "no cluster fits",
		change: func(a *apiclient.App) {
			a.Status, a.StatusMessage = "not ready", "not placed"
			a.Placed, a.Placement = "not placed", "No workload cluster can take the app: no pool has 4 CPU free"
		},
		want: "Status:     not ready: not placed\nCluster:    none (No workload cluster can take the app: no pool has 4 CPU free)\n",
	}, {
		name: "in maintenance",
		change: func(a *apiclient.App) {
			a.Maintenance = true
			a.Status, a.StatusMessage = "not ready", "The app is in maintenance mode (spec.suspended)"
		},
		want: "Status:     not ready: The app is in maintenance mode (spec.suspended)\nCluster:    pending\n" +
			"Mode:       maintenance: no instance runs and the URL answers 503 with a maintenance page (bex apps set web --maintenance off)\n",
	}, {
		name: "its cluster went away",
		change: func(a *apiclient.App) {
			a.Placed, a.Cluster, a.Placement = "not placed", "alpha", "No workload cluster can take the app: cluster alpha is gone from the fleet (its Placement still names alpha/workers): no pool has room"
		},
		want: "Status:     ready\nCluster:    none (No workload cluster can take the app: cluster alpha is gone from the fleet (its Placement still names alpha/workers): no pool has room)\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			app := base
			tc.change(&app)
			var b bytes.Buffer
			if err := renderAppInfo(&b, app); err != nil {
				t.Fatal(err)
			}
			if want := head + tc.want + "Created:    2026-05-06 07:08\n"; b.String() != want {
				t.Errorf("printed\n%s\nwant\n%s", b.String(), want)
			}
		})
	}
}
