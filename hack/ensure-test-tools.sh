#!/usr/bin/env bash
# Installs the Debian packages make test drives besides Go: Chromium for the
# dashboard's browser tests, Node.js and npm for the Node.js stack. As root
# with apt-get it installs what is missing; otherwise it says what to install.
set -euo pipefail

missing=()
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
((${#missing[@]})) || exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "==> installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
	exit 0
fi
echo "make test needs ${missing[*]}: install them (Debian: sudo apt-get install ${missing[*]}) and run make test again" >&2
exit 1
