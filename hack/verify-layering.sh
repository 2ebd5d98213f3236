#!/usr/bin/env bash
# verify-layering.sh: the layers of the tree import downwards only. A
# package under internal/ (its tests included) imports nothing from web/,
# builder/, controllers/ or cmd/; apis/ imports no other bex package but
# apis/. Prints each import that breaks a rule and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
mod=$($GO list -m)
bad=$($GO list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}' ./internal/... ./apis/... |
	awk -v m="$mod" '{
		pkg = $1
		for (i = 2; i <= NF; i++) {
			imp = $i
			if (index(imp, m "/") != 1) continue
			rel = substr(imp, length(m) + 2)
			if (index(pkg, m "/internal/") == 1 && rel ~ /^(web|builder|controllers|cmd)(\/|$)/)
				print pkg " imports " imp " (internal/ may not import web/, builder/, controllers/ or cmd/)"
			if (index(pkg, m "/apis/") == 1 && rel !~ /^apis(\/|$)/)
				print pkg " imports " imp " (apis/ is types only: it imports no other bex package)"
		}
	}' | sort -u)
if [ -n "$bad" ]; then
	echo "layering broken:"
	echo "$bad"
	exit 1
fi
