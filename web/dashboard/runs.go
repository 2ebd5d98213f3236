package dashboard

import (
	"cmp"
	"slices"
	"strings"

	"bex.co/bex/web/api/apiclient"
)

// recentRuns is how many of an app's newest runs its page lists; bex
// runs lists them all.
const recentRuns = 10

// appRunsView is the Runs section of the app page.
type appRunsView struct {
	// Rows are the runs, newest first.
	Rows []apiclient.Run
	// Newest is how many of the newest runs the page lists at most.
	Newest int
	// More says older runs were left out.
	More bool
}

// appRuns is what the app page lists of an app's runs: the n newest of
// newest (the API's list, newest first, asked for n+1 to know whether
// there are more), then any older run that runs still, from running (the
// instances' answer): every run that runs keeps its row and its Stop
// button whatever came after it.
func appRuns(newest []apiclient.Run, running []apiclient.RunningRun, n int) appRunsView {
	v := appRunsView{Rows: newest[:min(len(newest), n)], Newest: n, More: len(newest) > n}
	shown := make(map[int]bool, len(v.Rows))
	for _, r := range v.Rows {
		shown[r.Number] = true
	}
	var older []apiclient.Run
	for _, r := range running {
		if shown[r.Number] {
			continue
		}
		older = append(older, apiclient.Run{
			Number: r.Number, Release: r.Release, Command: r.Command, Terminal: r.Terminal, Detached: r.Detached, CreatedBy: r.CreatedBy,
			Status: "running", StartedAt: r.Since, StopRequestedAt: r.StopRequestedAt, StopRequestedBy: r.StopRequestedBy,
		})
	}
	slices.SortFunc(older, func(a, b apiclient.Run) int { return cmp.Compare(b.Number, a.Number) })
	v.Rows = append(slices.Clip(v.Rows), older...)
	return v
}

// runState is a run's status as the page writes it: Head in a badge of
// class Class ("exit 143"), then Tail (": stopped by a@b.c"); together
// they read as bex runs' STATUS.
type runState struct{ Class, Head, Tail string }

// runStateOf splits r's Summary for the page: green while it runs and
// once it exited 0, grey while it stops, red for any other end.
func runStateOf(r apiclient.Run) runState {
	s := r.Summary()
	head := s
	if i := strings.IndexAny(s, ":("); i > 0 {
		head = strings.TrimRight(s[:i], " ")
	}
	st := runState{Class: "failed", Head: head, Tail: s[len(head):]}
	switch {
	case r.Status == "running" && r.StopRequestedAt != nil:
		st.Class = "pending"
	case r.Status == "running", r.Status == "succeeded":
		st.Class = "ready"
	}
	return st
}
