#!/usr/bin/env bash
# `gpud scan --kernel-log` beside `grep -c -E 'NVRM: Xid|SXid'` on the same generated log
# (bench/kmsg-gen-log.sh: every saved-log format, one Xid or SXid line in 10,000), in the page
# cache, for each size in SIZES_MB (MiB; default "256 1024"). gpud runs as `gpud scan` does by
# default: every component with every kernel-log rule, its checks and the report included. grep
# writes its count to a file (with its output on /dev/null GNU grep stops at the first match). The
# two run in turn, ROUNDS times (default 5), and each one's best wall time is kept: the machine's
# other work slows the one then running, never both alike.
#   usage: bench/kmsg-scan-bench.sh [build-dir]
set -euo pipefail
build=${1:-build}
gpud=$build/gpud
sizes=${SIZES_MB:-256 1024}
rounds=${ROUNDS:-5}
[[ -x $gpud ]] || { echo "bench: $gpud missing; run make first" >&2; exit 2; }
work=$(mktemp -d /tmp/gpud-kmsg-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
here=$(dirname "$0")

now_ns() { date +%s%N; }
for size_mb in $sizes; do
  log=$work/kernel-$size_mb.log
  "$here/kmsg-gen-log.sh" "$size_mb" "$log"
  bytes=$(stat -c %s "$log")
  echo "== kernel-log scan: $size_mb MiB, $(wc -l <"$log") lines, in the page cache, best of $rounds =="
  cat "$log" >/dev/null
  best_g=; best_r=
  for ((i = 0; i < rounds; i++)); do
    t0=$(now_ns)
    "$gpud" scan --kernel-log "$log" --json --log-level error >"$work/scan.json" || true
    t1=$(now_ns)
    grep -c -E 'NVRM: Xid|SXid' "$log" >"$work/grep.out" || true
    t2=$(now_ns)
    g=$((t1 - t0)); r=$((t2 - t1))
    [[ -z $best_g || $g -lt $best_g ]] && best_g=$g
    [[ -z $best_r || $r -lt $best_r ]] && best_r=$r
  done
  events=$(jq '[.components[].events | length] | add' "$work/scan.json" 2>/dev/null || echo "?")
  awk -v b="$bytes" -v g="$best_g" -v r="$best_r" -v m="$(cat "$work/grep.out")" -v e="$events" 'BEGIN {
    printf "gpud scan --kernel-log: %6.3f s  %8.1f MB/s (every rule and check; %s events)\n", g / 1e9, b * 1e3 / g, e
    printf "grep -c -E:             %6.3f s  %8.1f MB/s (%d matching lines)\n", r / 1e9, b * 1e3 / r, m
    printf "gpud / grep speed:      %.2f x (target >= 1.5)\n", r / g
  }'
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
  rm -f "$log"
done
