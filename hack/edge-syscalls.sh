#!/usr/bin/env bash
# Counts, for each proxied scenario of the edge bench, the system calls and
# context switches per request of the proxy, the app and the load
# generator (docs/perf.md, "Traefik's TLS throughput, profiled"): whether a
# proxy writes a response or a request in more pieces than another, or
# wakes more often. It runs test/bench/edgebench with one round per
# scenario and, from 5 s into each (3 s of warm-up and 2 s of the measured
# window), reads each process's system-call tracepoints with perf stat for
# 6 s. Requests are counted as the app's writes: one a response.
#
#   bash hack/edge-syscalls.sh [PROXY]    # PROXY: traefik (default), caddy, nginx, haproxy
#
# Needs perf (Debian: linux-perf) and root: the tracepoints are root's.
set -euo pipefail
proxy=${1:-traefik}
case $proxy in
traefik) name=Traefik ;; caddy) name=Caddy ;; nginx) name=nginx ;; haproxy) name=HAProxy ;;
*) echo "edge-syscalls: unknown proxy $proxy: use traefik, caddy, nginx or haproxy" >&2; exit 2 ;;
esac
command -v perf > /dev/null || { echo "edge-syscalls: perf is missing: apt-get install linux-perf" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "edge-syscalls: reading system-call tracepoints needs root" >&2; exit 1; }

cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/bex-edge-syscalls-XXXXXX)
bench=
trap '[ -z "$bench" ] || kill $bench 2> /dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/edgebench" ./test/bench/edgebench
if [ "$proxy" = caddy ] || [ "$proxy" = traefik ]; then
	go run ./cmd/bex-kubebin --tools "$proxy"
fi

"$work/edgebench" --proxies "$proxy" --rounds 1 --duration 16s --warmup 3s > "$work/bench.log" 2>&1 &
bench=$!
calls=(read write epoll_pwait futex nanosleep)
events=context-switches$(printf ',syscalls:sys_enter_%s' "${calls[@]}")

# tally PIDS FILE counts events of the processes PIDS (comma-separated).
tally() { perf stat -x, -e "$events" -p "$1" -o "$2" -- sleep 6 > /dev/null 2>&1; }
# count FILE EVENT prints the count of EVENT in FILE.
count() { awk -F, -v e="$2" '$3 == e { print $1 }' "$1"; }
# per N prints N per request of the scenario being read.
per() { awk -v n="$1" -v r="$requests" 'BEGIN { printf "%.2f", n / r }'; }

printf '%-14s | %-44s | %-11s | %-11s\n' scenario "proxy: read write epoll futex nanosleep cs" "app: r w" "load: r w"
for sc in "edge plain" "edge TLS" "$name plain" "$name TLS"; do
	until grep -q "round 1/1  $sc " "$work/bench.log"; do
		kill -0 $bench 2> /dev/null || { cat "$work/bench.log" >&2; exit 1; }
		sleep 0.2
	done
	sleep 5
	if [ "${sc%% *}" = edge ]; then
		pids=$(pgrep -f "$work/edgebench edge" | paste -sd,)
	else
		pids=$(pgrep -x "$proxy" | paste -sd,)
	fi
	app=$(pgrep -f "$work/edgebench app" | paste -sd,)
	tally "$pids" "$work/proxy" &
	w1=$!
	tally "$app" "$work/app" &
	w2=$!
	tally $bench "$work/load" &
	wait $w1 $w2 $!
	requests=$(count "$work/app" syscalls:sys_enter_write)
	p=()
	for e in "${calls[@]}"; do p+=("$(per "$(count "$work/proxy" "syscalls:sys_enter_$e")")"); done
	p+=("$(per "$(count "$work/proxy" context-switches)")")
	printf '%-14s | %-44s | %-11s | %-11s\n' "$sc" "${p[*]}" \
		"$(per "$(count "$work/app" syscalls:sys_enter_read)") $(per "$requests")" \
		"$(per "$(count "$work/load" syscalls:sys_enter_read)") $(per "$(count "$work/load" syscalls:sys_enter_write)")"
done
wait $bench
echo "Per request (the app's writes in each 6 s window); the bench's own figures are in the run's report:"
sed -n '/^| scenario/,/^$/p' "$work/bench.log"
