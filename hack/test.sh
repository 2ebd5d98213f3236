#!/usr/bin/env bash
# Runs the whole test suite (make test): go test -json of every package,
# read by test/testreport, which prints what go test prints without -json
# and then the slowest packages and tests, the wall time and how busy the
# cores were; every package's and test's time goes to out/test-times.txt.
#
# go test starts packages in the order given (-p of them at once, 2 on two
# cores), so the slowest start first: one of them started last would end
# alone, with a core idle. Keep the list in step with the "slowest
# packages" of a recent run. Much of the suite waits on clusters and
# rollouts: the cores were 56 to 62% busy on average in the clean-clone
# runs of 2026-12-06 (42 to 44 min on 2 cores, against 51 min with
# ./test/embedded started last); 51% in a run with nothing else on the
# machine (39 min, 2026-12-06 11:00), where process accounting (acct's
# sa) gave 43% of the CPU used to the kube-apiservers the tests start
# (357 of them, 2.8 CPU seconds each), 13% to linking test binaries and
# 8% to etcd. A run beside other work is slower by up to a third (54 min
# with an engineer's tests beside it). Since the kube driver's tests run
# on a real node (internal/runtime/kube 257 s, 71 s before) the cores were
# 78 to 91% busy and the suite took 61.5 min alone on the machine
# (2026-12-06 14:51): the CPU, not the waits, bounds it now. With
# TestKubeDriver's subtests side by side on its node (78 s, 233 s before)
# the clean-clone run took 44 min 50 s (2026-12-06 17:43, 59% busy;
# test/continuity 806 s, controllers/fleetupgrade 570 s, where they took
# 1,032 and 828 s beside the kube tests one after another); 42 min 55 s
# with -vet=off -ldflags=-w (18:31, 55% busy). With the fleet tests on
# the real Cluster API controllers it took 71 min 41 s (2026-12-07 11:29,
# 81% busy), and 55 min 23 s (15:21, 72% busy) once two of them were
# merged, one dropped, their Machine watches no longer polled and
# ./controllers/fleetupgrade started apart from ./test/continuity
# (docs/fleet.md, "What is left of issue 18"); 50 min 39 s (21:36, 66%
# busy) on a freshly set-up machine. Next, if it grows again:
# a shared management cluster per package where tests need no own.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
# -vet=off: make verify runs go vet with every analyzer (CI runs it just
# before make test), so go test's own pass over each package, a subset of
# them, is spent twice. -ldflags=-w: test binaries without DWARF, a fifth
# less CPU per link (6.2 to 4.4 s user for controllers/app's, 2026-12-06);
# a failing test's stack still names files and lines.
GOTEST_FLAGS=${GOTEST_FLAGS:--count=1 -timeout 60m -vet=off -ldflags=-w}

# ./controllers/fleetupgrade runs two fleets at once (t.Parallel): started
# beside ./test/continuity, three rollouts of real clusters shared two
# cores and each took twice its time alone (continuity's wired scenario
# 741 s against 271 s in the clean-clone run of 2026-12-07 11:29), so it
# starts once ./test/embedded, whose tests run one at a time, is done.
first=(
	./test/continuity
	./test/embedded
	./controllers/fleetupgrade
	./cmd/bex-images/app
	./controllers/localinfra
	./test/dashboard
	./builder/build
	./node
	./web/api
)

mkdir -p bin out
# The commands the end-to-end tests run (platformtest.BuildBinaries) are
# built once for the whole run, before go test, into a directory of the
# run's own, and linked into each test's directory from there. Built by
# each test instead, they took about a tenth of the suite's CPU in the
# clean-clone run of 2026-12-07 04:05 (process accounting, 6,782 CPU s in
# all: 376 of the 694 s of linking were under test processes, most of
# them these builds, and test/continuity's compiled for 285 s packages
# that go test was compiling at the same time).
BEX_TEST_BIN=$(mktemp -d "${TMPDIR:-/tmp}/bex-test-bin.XXXXXX")
export BEX_TEST_BIN
trap 'rm -rf "$BEX_TEST_BIN"' EXIT
$GO build -ldflags=-w -o "$BEX_TEST_BIN/" ./cmd/...
$GO build -o bin/testreport ./test/testreport
set +e
# shellcheck disable=SC2086 # GOTEST_FLAGS is a list of flags
$GO test $GOTEST_FLAGS -json "${first[@]}" ./... | bin/testreport -times out/test-times.txt
status=("${PIPESTATUS[@]}")
set -e
if ((status[0] != 0)); then
	exit "${status[0]}"
fi
exit "${status[1]}"
