#!/usr/bin/env bash
# verify-generated.sh [CRD_DIR] regenerates the CRDs and deep-copy functions of
# the CRD packages under apis/ (hack/crd-packages.sh) into a temporary
# directory and compares them with the committed ones: the CRDs in CRD_DIR
# (default deploy/crds; those of infrastructure.bex.co in deploy/localinfra-crds) and each package's zz_generated.deepcopy.go. It exits
# 1, naming the files that differ, when the committed files are stale;
# `make verify` runs it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crd_dir="$(cd "${1:-$root/deploy/crds}" && pwd)"
cd "$root"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

stale=0

go tool controller-gen crd paths="$(hack/crd-packages.sh)" output:crd:artifacts:config="$tmp/crds"
mkdir -p "$tmp/localinfra-crds"
mv "$tmp"/crds/infrastructure.bex.co_*.yaml "$tmp/localinfra-crds/"
if ! diff -u <(cd "$root/deploy/localinfra-crds" && cat *.yaml) <(cd "$tmp/localinfra-crds" && cat *.yaml); then
	echo "verify-generated: the CRDs in deploy/localinfra-crds differ from what apis/ generates" >&2
	stale=1
fi
if ! diff -r -u "$crd_dir" "$tmp/crds"; then
	echo "verify-generated: the CRDs in $crd_dir differ from what apis/ generates:" >&2
	diff -r -q "$crd_dir" "$tmp/crds" >&2 || true
	stale=1
fi

chart_crds="$root/deploy/chart/bex/crds"
if ! diff -r -u "$root/deploy/crds" "$chart_crds"; then
	echo "verify-generated: the chart's CRDs in $chart_crds differ from deploy/crds" >&2
	stale=1
fi

# Each package goes to its own directory: the object generator names every
# file zz_generated.deepcopy.go.
while IFS= read -r pkg; do
	pkg="${pkg#./}"
	mkdir -p "$tmp/$pkg"
	go tool controller-gen object paths="./$pkg" output:object:dir="$tmp/$pkg"
	if ! diff -u "$pkg/zz_generated.deepcopy.go" "$tmp/$pkg/zz_generated.deepcopy.go"; then
		echo "verify-generated: $pkg/zz_generated.deepcopy.go differs from what apis/ generates" >&2
		stale=1
	fi
done < <(hack/crd-packages.sh -l)

if [ "$stale" -ne 0 ]; then
	echo "verify-generated: generated files are out of date; run 'make generate' and commit the result" >&2
	exit 1
fi
