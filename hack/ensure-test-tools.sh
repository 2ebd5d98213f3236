#!/usr/bin/env bash
# Installs the Debian packages make test drives besides Go: Chromium for the
# dashboard's browser tests, Node.js and npm for the Node.js stack.
exec bash "$(dirname "$0")/apt-ensure.sh" "make test" "chromium|chromium-browser=chromium" node=nodejs npm=npm
