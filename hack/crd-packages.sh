#!/usr/bin/env bash
# crd-packages.sh prints the Go packages under apis/ that controller-gen owns
# (those whose doc.go carries +kubebuilder:object:generate=true), as one
# controller-gen paths value: ./apis/a/v1;./apis/b/v1. With -l it prints one
# directory a line instead.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

dirs=()
while IFS= read -r doc; do
	dirs+=("./$(dirname "$doc")")
done < <(grep -rl --include=doc.go '^// +kubebuilder:object:generate=true$' apis | sort)

if [ "${#dirs[@]}" -eq 0 ]; then
	echo "crd-packages: no package under apis/ carries +kubebuilder:object:generate=true" >&2
	exit 1
fi
if [ "${1:-}" = "-l" ]; then
	printf '%s\n' "${dirs[@]}"
else
	(IFS=';'; echo "${dirs[*]}")
fi
