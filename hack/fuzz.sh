#!/usr/bin/env bash
# Runs each Go fuzz target of the project for FUZZTIME (default 30s), one at a
# time, with FUZZPARALLEL workers (default 1). A target that finds a failing
# input stops the run; go test writes the input under the package's
# testdata/fuzz/<target>/, where it stays as a regression case that every
# `go test` runs. The seed corpora run in `make test` as ordinary tests.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZPARALLEL=${FUZZPARALLEL:-1}

# package and target, one pair a line.
targets=(
	"./builder/gitserver FuzzPktLine"
	"./builder/gitserver FuzzSidebandWriter"
	"./builder/gitserver FuzzReceivePack"
	"./builder/gitserver FuzzUploadPack"
	"./builder/build FuzzParseProcfile"
	"./builder/build FuzzDetect"
	"./web/api FuzzNormalizeHostname"
	"./web/api FuzzHostnamesOverlap"
	"./web/api FuzzDefaultHostname"
	"./web/api FuzzAPIRequestBodies"
	"./internal/edge FuzzResolveHost"
)

# Every Fuzz function in the tree must be listed above.
listed=$(printf '%s\n' "${targets[@]}" | awk '{print $2}' | sort)
found=$(grep -rhoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/' | sort)
if [[ "$listed" != "$found" ]]; then
	echo "hack/fuzz.sh: the target list differs from the Fuzz functions in the tree:" >&2
	diff <(echo "$listed") <(echo "$found") >&2 || true
	exit 1
fi

n=${#targets[@]}
i=0
for t in "${targets[@]}"; do
	i=$((i + 1))
	read -r pkg name <<<"$t"
	echo "==> [$i/$n] $name ($pkg) for $FUZZTIME"
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel "$FUZZPARALLEL" "$pkg"
done
echo "==> all $n fuzz targets ran for $FUZZTIME each without a failure"
