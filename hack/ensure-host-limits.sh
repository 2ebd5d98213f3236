#!/usr/bin/env bash
# Raises the host's limit of inotify instances per user to what local
# fleets need. A fleet machine's kube-apiserver and kube-controller-manager
# watch their certificate and CA files with an inotify instance for each
# (6 and 3 to 4, measured on controllers/localinfra's rollout test,
# 2026-12-07), every Cluster API manager its webhook certificate. Debian's
# default, 128 per user, runs out at about a dozen machines, and a Cluster
# API manager that cannot get one exits ("too many open files"); make test
# runs several fleets at once, all as one user. As root it raises the
# limit; otherwise it says how to and goes on, since a small fleet fits.
set -euo pipefail

want=1024
file=/proc/sys/fs/inotify/max_user_instances
[ -r "$file" ] || exit 0
have=$(<"$file")
((have >= want)) && exit 0
if [ "$(id -u)" = 0 ] && echo "$want" 2>/dev/null >"$file"; then
	echo "==> raised fs.inotify.max_user_instances from $have to $want (local fleets' machines watch their certificates)"
	exit 0
fi
echo "warning: fs.inotify.max_user_instances is $have; local fleets of more than a few machines need more," \
	"or their Cluster API managers exit with \"too many open files\": run sudo sysctl -w fs.inotify.max_user_instances=$want" >&2
