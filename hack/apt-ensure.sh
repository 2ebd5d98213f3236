#!/usr/bin/env bash
# apt-ensure.sh WHAT COMMAND=PACKAGE...: makes sure each COMMAND is on PATH,
# or in /usr/sbin or /sbin, where Debian installs programs for root (nginx,
# nft), off other users' PATH. As root with apt-get it installs the packages
# of those missing; otherwise it says what to install (for WHAT, and the
# hint in $APT_ENSURE_HINT) and fails.
set -euo pipefail

what=$1
shift
missing=()
for pair in "$@"; do
	cmd=${pair%%=*}
	pkg=${pair#*=}
	for alt in ${cmd//|/ }; do
		command -v "$alt" >/dev/null && continue 2
		for dir in /usr/sbin /sbin; do
			[ -x "$dir/$alt" ] && continue 3
		done
	done
	missing+=("$pkg")
done
((${#missing[@]})) || exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "==> installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
	exit 0
fi
echo "$what needs ${missing[*]}: install them (Debian: sudo apt-get install ${missing[*]})${APT_ENSURE_HINT:+, $APT_ENSURE_HINT}" >&2
exit 1
