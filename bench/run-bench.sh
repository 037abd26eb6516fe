#!/usr/bin/env bash
# `make bench`: gpud's idle footprint beside prometheus-node-exporter, micro-benchmarks, and the API's
# throughput beside nginx (bench/http-bench.sh), then a fleet of FLEET_NODES daemons under one Prometheus
# (bench/fleet-bench.sh, docs/FLEET.md).
#   - time from start to the first successful /healthz (median of 5 starts)
#   - peak RSS (VmHWM) and CPU seconds of gpud idling IDLE_S seconds: with all host components, with
#     eight fake GPUs, and with a private containerd running (its CRI listed through `gpud cri-helper`
#     children; the same daemon loading the cri module itself is measured beside it, for comparison)
#   - in each case Debian's prometheus-node-exporter started at the same time and idling beside it:
#     every figure is printed beside node_exporter's from the same minute, with the ratio and its goal.
# Both daemons are scraped every 15 s, so the comparison is like for like: node_exporter over plain HTTP, gpud
# on its plain-HTTP metrics listener (--metrics-listen-address, what the shipped DaemonSet's PodMonitor
# scrapes), each waited for on that /metrics. With eight GPUs the same daemon scraped over its HTTPS API
# (a TLS handshake per scrape, /healthz over HTTPS to wait for it) is measured beside, for comparison.
# gpud's CPU counts its children's too (the CRI helper, systemctl), as /proc/<pid>/stat's cutime and cstime.
# FOOTPRINT_ONLY=1 stops after the footprint figures.
set -euo pipefail
build=${1:-build}
gpud=$build/gpud
idle_s=${IDLE_S:-60}
[[ -x $gpud ]] || { echo "bench: $gpud missing; run make first" >&2; exit 2; }
exporter=$(command -v prometheus-node-exporter || true)
[[ -n $exporter ]] || { echo "bench: prometheus-node-exporter missing; run scripts/install-deps.sh" >&2; exit 2; }

work=$(mktemp -d /tmp/gpud-bench-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
clk_tck=$(getconf CLK_TCK)
# utime + stime + cutime + cstime (the children it has waited for), of a process whose name has no space.
cpu_seconds() { awk -v t="$clk_tck" '{printf "%.3f", ($14+$15+$16+$17)/t}' "/proc/$1/stat"; }
hwm_kib() { awk '/^VmHWM/{print $2}' "/proc/$1/status"; }

src_dir=$(cd "$(dirname "$0")/.." && pwd)
# Absolute: the daemon resolves --nvml-lib on its own (a relative path would load no library).
bench_env=(GPUD_BINARY=$gpud GPUD_FAKE_NVML=$(cd "$build" && pwd)/libnvidia-ml.so.1 GPUD_SOURCE_DIR=$src_dir)
# A counter of a benchmark from gpud_bench's JSON output file ("?" when absent).
counter_of() {
  python3 -c 'import json,sys
try:
    runs = json.load(open(sys.argv[1]))["benchmarks"]
    print(next("%.0f" % r[sys.argv[3]] for r in runs if r["name"].startswith(sys.argv[2])))
except Exception:
    print("?")' "$1" "$2" "$3"
}
if [[ ${FOOTPRINT_ONLY:-0} != 1 ]]; then
  echo "== startup: exec to the first successful /healthz (TLS, fresh data dir), polled in-process =="
  env "${bench_env[@]}" $build/gpud_bench --benchmark_filter='^BM_StartupToHealthz' \
    --benchmark_out="$work/startup.json" --benchmark_out_format=json 2>&1 | grep -E 'BM_|Startup' || true
  echo "plain node: the Time column is the mean of 10 starts (target < 300 ms)"
  echo "hung driver (h100x8-hung-driver.json, a call blocks 15 s past the 10 s deadline):" \
    "worst of 5 starts $(counter_of "$work/startup.json" BM_StartupToHealthzOnHungDriver worst_ms) ms (goal <= 1000 ms)"
  echo
  echo "== detection: Xid line appended to the followed kernel log -> the Xid component Unhealthy (8 fake GPUs) =="
  env "${bench_env[@]}" $build/gpud_bench --benchmark_filter='^BM_XidLineToUnhealthy' \
    --benchmark_out="$work/detection.json" --benchmark_out_format=json 2>&1 | grep -E 'BM_|ERROR' || true
  echo "-> /v1/states Unhealthy: worst of 10 $(counter_of "$work/detection.json" BM_XidLineToUnhealthy worst_states_ms) ms (goal <= 100 ms)"
  echo "-> /metrics gpud_component_health Unhealthy: worst of 10 $(counter_of "$work/detection.json" BM_XidLineToUnhealthy worst_metrics_ms) ms (goal <= 100 ms)"
  echo
fi
# ---- Side by side with node_exporter ------------------------------------------------------------
# side_start NAME ENV=VALUE... -- gpud run flags...: starts one gpud (TLS, its own port and data dir) with a
# plain-HTTP metrics listener and waits for its /metrics; a NAME ending in "-https" has no metrics
# listener and is waited for on /healthz and scraped over the HTTPS API instead. side_measure TITLE SECONDS GOAL_RSS GOAL_CPU NAME...: starts node_exporter, idles
# SECONDS scraping all of them every 15 s, and prints each gpud's peak RSS and CPU beside node_exporter's,
# with the ratios and whether they meet the goals. The daemons are stopped afterwards.
declare -A side_pid side_port side_url
side_names=()
side_start() {
  local name=$1; shift
  local env=()
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  local port ready; port=$(free_port)
  if [[ $name == *-https ]]; then
    side_url[$name]=https://127.0.0.1:$port/metrics; ready=https://127.0.0.1:$port/healthz
  else
    local mport; mport=$(free_port)
    set -- --metrics-listen-address "127.0.0.1:$mport" "$@"
    side_url[$name]=http://127.0.0.1:$mport/metrics; ready=${side_url[$name]}
  fi
  env "${env[@]}" "$gpud" run --listen-address 127.0.0.1:$port --data-dir "$work/$name" --log-level warn \
    "$@" 2>"$work/$name.log" &
  side_pid[$name]=$!; side_port[$name]=$port; pids+=($!); side_names+=("$name")
  until curl -skf "$ready" >/dev/null 2>&1; do sleep 0.01; done
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }
verdict() { awk -v r="$1" -v g="$2" 'BEGIN{ print (r != "n/a" && r <= g) ? "met" : "NOT met" }'; }
side_measure() {
  local title=$1 secs=$2 goal_rss=$3 goal_cpu=$4; shift 4
  local nport; nport=$(free_port)
  $exporter --web.listen-address=127.0.0.1:$nport >"$work/ne-$title.log" 2>&1 &
  local npid=$!; pids+=($npid)
  until curl -sf "http://127.0.0.1:$nport/metrics" >/dev/null 2>&1; do sleep 0.01; done
  local -A c0
  local n
  for n in "$@"; do c0[$n]=$(cpu_seconds ${side_pid[$n]}); done
  local n_c0; n_c0=$(cpu_seconds $npid)
  local end=$(( $(date +%s) + secs ))
  while (( $(date +%s) < end )); do
    for n in "$@"; do curl -skf "${side_url[$n]}" >/dev/null || true; done
    curl -sf "http://127.0.0.1:$nport/metrics" >/dev/null || true
    sleep 15
  done
  local n_hwm n_cpu
  n_hwm=$(hwm_kib $npid)
  n_cpu=$(awk -v a="$n_c0" -v b="$(cpu_seconds $npid)" 'BEGIN{printf "%.3f", b-a}')
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  printf '%-34s %10s %8s %10s %8s\n' "daemon (${secs} s idle)" "peak RSS" "ratio" "CPU s" "ratio"
  printf '%-34s %6.1f MiB %8s %10s %8s\n' "prometheus-node-exporter" \
    "$(awk -v k=$n_hwm 'BEGIN{print k/1024}')" "1.00" "$n_cpu" "1.00"
  local first_rr="" first_rc=""
  for n in "$@"; do
    local p=${side_pid[$n]} hwm cpu rr rc
    hwm=$(hwm_kib $p)
    cpu=$(awk -v a="${c0[$n]}" -v b="$(cpu_seconds $p)" 'BEGIN{printf "%.3f", b-a}')
    rr=$(ratio "$hwm" "$n_hwm"); rc=$(ratio "$cpu" "$n_cpu")
    printf '%-34s %6.1f MiB %8s %10s %8s\n' "gpud: $n" "$(awk -v k=$hwm 'BEGIN{print k/1024}')" \
      "$rr" "$cpu" "$rc"
    [[ -n $first_rr ]] || { first_rr=$rr; first_rc=$rc; }
  done
  local goals="RSS ratio ${first_rr} (goal <= $goal_rss: $(verdict "$first_rr" "$goal_rss"))"
  [[ -z $goal_cpu ]] || goals+=", CPU ratio ${first_rc} (goal <= $goal_cpu: $(verdict "$first_rc" "$goal_cpu"))"
  echo "gpud: $1: $goals"
  kill $npid 2>/dev/null || true
  for n in "$@"; do kill ${side_pid[$n]} 2>/dev/null || true; done
}

echo "== idle footprint beside node_exporter, all host components, no GPU =="
side_start host -- 
side_measure host "$idle_s" 0.75 "" host
echo

# Eight fake GPUs (testing/fake_nvml) through the real NVML loader.
fake_nvml=$build/libnvidia-ml.so.1
if [[ -f $fake_nvml ]]; then
  scenario=$(cd "$(dirname "$0")/.." && pwd)/testing/fixtures/nvml/h100x8-healthy.json
  echo "== eight fake GPUs (h100x8-healthy.json) =="
  scan_ms=()
  for i in 1 2 3 4 5; do
    t0=$(date +%s%N)
    FAKE_NVML_SCENARIO=$scenario $gpud scan --nvml-lib "$fake_nvml" >/dev/null 2>&1 || true
    t1=$(date +%s%N)
    scan_ms+=($(( (t1 - t0) / 1000000 )))
  done
  scan_median=$(printf '%s\n' "${scan_ms[@]}" | sort -n | sed -n 3p)
  echo "gpud scan wall time, median of 5: ${scan_median} ms (runs: ${scan_ms[*]}; target < 1000 ms)"
  side_start gpus8 FAKE_NVML_SCENARIO="$scenario" -- --nvml-lib "$fake_nvml"
  side_start gpus8-https FAKE_NVML_SCENARIO="$scenario" -- --nvml-lib "$fake_nvml"
  side_measure gpus8 "$idle_s" 0.70 1.0 gpus8 gpus8-https
else
  echo "bench: $fake_nvml missing (build the fake_nvml target): skipping the eight-GPU figures"
fi
echo

# With containerd running: a private containerd (root, state, socket in the work folder), as the
# containerd tests start it. gpud lists its pod sandboxes every check (60 s) through `gpud cri-helper`
# children; the same daemon with --cri-helper "" loads libgpud-cri.so (gRPC, protobuf) itself.
containerd=$(command -v containerd || true)
why_not=""
[[ -n $containerd ]] || why_not="containerd is not installed"
[[ -n $why_not || $(id -u) -eq 0 ]] || why_not="containerd needs root"
[[ -n $why_not || -f $build/libgpud-cri.so ]] || why_not="$build/libgpud-cri.so missing"
if [[ -z $why_not ]]; then
  echo "== idle footprint with containerd running (private containerd, its CRI listed every check) =="
  c=$work/containerd
  mkdir -p "$c"
  cat >"$c/config.toml" <<TOML
version = 2
root = "$c/root"
state = "$c/state"
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = "$c/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "$c/cni/bin"
  conf_dir = "$c/cni/conf"
TOML
  "$containerd" --config "$c/config.toml" >"$c/containerd.log" 2>&1 &
  cpid=$!; pids+=($cpid)
  for _ in $(seq 1 200); do [[ -S $c/containerd.sock ]] && break; sleep 0.05; done
  if [[ -S $c/containerd.sock ]]; then
    # The helper alone: its peak RSS for one listing (it lives for the call, once a minute).
    helper_kib=$(/usr/bin/time -f %M "$gpud" cri-helper list-pods --socket "$c/containerd.sock" \
      --timeout-ms 10000 2>&1 >/dev/null | tail -1)
    side_start containerd -- --containerd-socket "$c/containerd.sock"
    side_start containerd-in-process -- --containerd-socket "$c/containerd.sock" --cri-helper ""
    k_pid=${side_pid[containerd]}; i_pid=${side_pid[containerd-in-process]}
    k_port=${side_port[containerd]}
    # The containerd component checks every 60 s: idle long enough for a few listings.
    k_idle=$(( idle_s > 125 ? idle_s : 125 ))
    # Read what is mapped before side_measure stops the daemons.
    ( sleep $(( k_idle - 5 ))
      state=$(curl -skf "https://127.0.0.1:$k_port/v1/states?components=containerd" |
        jq -r '.[0].states[0] | "\(.health): \(.reason)"' 2>/dev/null || echo "?")
      echo "containerd component: $state" >"$work/containerd-state"
      echo "gRPC mapped in the daemon: $(grep -q libgrpc "/proc/$k_pid/maps" && echo yes || echo no)" \
        "(in-process daemon: $(grep -q libgrpc "/proc/$i_pid/maps" && echo yes || echo no))" \
        >>"$work/containerd-state" ) &
    spid=$!
    side_measure containerd "$k_idle" 0.80 "" containerd containerd-in-process
    wait $spid || true
    cat "$work/containerd-state" 2>/dev/null || true
    echo "the CRI helper (one listing, a child for its call): peak RSS" \
      "$(awk -v k="$helper_kib" 'BEGIN{printf "%.1f", k/1024}') MiB"
    kill $cpid 2>/dev/null || true
  else
    echo "bench: the private containerd did not start (see $c/containerd.log): skipping the with-containerd figures"
  fi
else
  echo "bench: $why_not: skipping the with-containerd figures"
fi
echo

[[ ${FOOTPRINT_ONLY:-0} == 1 ]] && exit 0

if [[ -x $build/gpud_bench ]]; then
  echo
  echo "== micro-benchmarks =="
  $build/gpud_bench --benchmark_min_time=0.2 --benchmark_filter='-BM_StartupToHealthz|BM_XidLineToUnhealthy'
fi

echo
"$(dirname "$0")/kmsg-scan-bench.sh" "$build"

echo
echo "== the API beside nginx (keep-alive TLS, wrk) =="
"$(dirname "$0")/http-bench.sh" "$build"

echo
"$(dirname "$0")/fleet-bench.sh" "$build"
