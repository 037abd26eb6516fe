#!/usr/bin/env bash
# `make bench`, the fleet part (docs/FLEET.md): FLEET_NODES (default 100) gpud daemons on this machine, each with
# its own data dir, kernel log, port and eight fake GPUs (testing/fake_nvml), scraped every 15 s by one real
# Prometheus with the shipped rules (deploy/prometheus), which sends to the shipped Alertmanager example
# (deploy/alertmanager, its timers as shipped) and on to a webhook receiver here. Measures:
#   - Prometheus's CPU and resident memory with no target, then with every node (the difference per target),
#     its head series and samples appended per second;
#   - samples and bytes per scrape of one node (as served, and gzip-compressed as Prometheus asks for them);
#   - the daemons' own CPU and memory meanwhile;
#   - the time from an Xid 79 written into one node's kernel log to the GpuFatalXid alert firing in Prometheus
#     and to the notification at the webhook.
#   fleet-bench.sh BUILD_DIR      (FLEET_NODES=N, FLEET_WINDOW_S=S: the measuring window, default 120)
set -euo pipefail
build=${1:-build}
nodes=${FLEET_NODES:-100}
window_s=${FLEET_WINDOW_S:-120}
src=$(cd "$(dirname "$0")/.." && pwd)
gpud=$build/gpud
fake_nvml=$build/libnvidia-ml.so.1
for f in "$gpud" "$fake_nvml"; do
  [[ -e $f ]] || { echo "fleet-bench: $f missing; run make first" >&2; exit 2; }
done
prometheus=$(command -v prometheus || true)
alertmanager=$(command -v prometheus-alertmanager || true)
[[ -n $prometheus && -n $alertmanager ]] ||
  { echo "fleet-bench: prometheus or prometheus-alertmanager missing; run scripts/install-deps.sh test" >&2; exit 2; }

work=$(mktemp -d /tmp/gpud-fleet-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

clk_tck=$(getconf CLK_TCK)
cpu_seconds() { awk -v t="$clk_tck" '{printf "%.3f", ($14+$15)/t}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
# N free loopback ports at once (held together while chosen, so they differ).
free_ports() {
  python3 -c 'import socket,sys
socks=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
read -r -a ports <<<"$(free_ports $((nodes + 3)))"
prom_port=${ports[nodes]}
am_port=${ports[nodes + 1]}
hook_port=${ports[nodes + 2]}

echo "== fleet: $nodes gpud daemons (8 fake GPUs each), one Prometheus scraping every 15 s, shipped rules =="
# Node 1 makes the TLS certificate the others serve too, so one scrape job verifies them all. The docker component
# is left out: `make test` installs docker.io and leaves it stopped, which all the nodes (one host) would report
# as Unhealthy, so every node would have a firing group before the fault is written.
start_node() {
  local i=$1 dir=$work/node-$1 scenario=h100x8-healthy.json extra=()
  ((i % 2 == 0)) && scenario=a100x8-healthy.json
  mkdir -p "$dir"
  : >"$dir/kmsg"
  ((i > 1)) && extra=(--tls-cert "$work/node-1/data/gpud.crt" --tls-key "$work/node-1/data/gpud.key")
  FAKE_NVML_SCENARIO=$src/testing/fixtures/nvml/$scenario GPUD_KMSG_PATH=$dir/kmsg \
    "$gpud" run --listen-address "127.0.0.1:${ports[i - 1]}" --data-dir "$dir/data" --nvml-lib "$fake_nvml" \
    --log-level warn --components=-docker "${extra[@]}" 2>"$dir/gpud.log" &
  pids+=($!)
  echo $! >"$dir/pid"
}
wait_healthz() {
  local i
  for ((i = 0; i < 600; i++)); do
    curl -skf "https://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "fleet-bench: the daemon on port $1 did not answer /healthz" >&2
  return 1
}
t_start=$(now)
start_node 1
wait_healthz "${ports[0]}"
for ((i = 2; i <= nodes; i++)); do start_node "$i"; done
for ((i = 1; i <= nodes; i++)); do wait_healthz "${ports[i - 1]}"; done
echo "all $nodes daemons answer /healthz after $(since "$t_start") s"

# The webhook receiver: one line per notification, "<arrival time> <body>".
cat >"$work/hook.py" <<'PY'
import http.server, sys, time
log = open(sys.argv[2], "a", buffering=1)
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode("utf-8", "replace")
        log.write("%.3f %s\n" % (time.time(), body.replace("\n", " ")))
        self.send_response(200); self.end_headers()
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Hook).serve_forever()
PY
python3 "$work/hook.py" "$hook_port" "$work/notifications" &
pids+=($!)
sed -e "s#url: .*#url: http://127.0.0.1:$hook_port/gpud-alerts#" "$src/deploy/alertmanager/alertmanager.yml" \
  >"$work/alertmanager.yml"
"$alertmanager" --config.file="$work/alertmanager.yml" --storage.path="$work/am" \
  --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= >"$work/alertmanager.log" 2>&1 &
pids+=($!)

# Prometheus first with no target (its own cost), then every node (a reload by SIGHUP).
write_prometheus_config() {
  {
    printf 'global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\n'
    printf 'rule_files:\n  - %s\n  - %s\n' "$src/deploy/prometheus/gpud-alerts.yml" \
      "$src/deploy/prometheus/dcgm-compat-rules.yml"
    printf 'alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ["127.0.0.1:%s"]\n' "$am_port"
    printf 'scrape_configs:\n  - job_name: gpud\n    scheme: https\n'
    printf '    tls_config:\n      ca_file: %s\n      server_name: localhost\n' "$work/node-1/data/gpud.crt"
    printf '    static_configs:\n'
    if (($1)); then
      for ((i = 1; i <= nodes; i++)); do
        printf '      - targets: ["127.0.0.1:%s"]\n        labels: {node: node-%s}\n' "${ports[i - 1]}" "$i"
      done
    else
      printf '      []\n'
    fi
  } >"$work/prometheus.yml"
}
write_prometheus_config 0
"$prometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --enable-feature=extra-scrape-metrics >"$work/prometheus.log" 2>&1 &
prom_pid=$!
pids+=($prom_pid)
query() {
  curl -sf --data-urlencode "query=$1" "http://127.0.0.1:$prom_port/api/v1/query" |
    python3 -c 'import json,sys
r=json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")'
}
until curl -sf "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1; do sleep 0.2; done
sleep 30
idle_cpu0=$(cpu_seconds $prom_pid)
sleep 30
idle_cpu_per_min=$(awk -v a="$idle_cpu0" -v b="$(cpu_seconds $prom_pid)" 'BEGIN{printf "%.3f", (b-a)*2}')
idle_rss=$(rss_kib $prom_pid)

write_prometheus_config 1
kill -HUP $prom_pid
t_reload=$(now)
until [[ $(query "count(up{job=\"gpud\"} == 1)") == "$nodes" ]]; do
  sleep 1
  if awk -v s="$(since "$t_reload")" 'BEGIN{exit !(s > 120)}'; then
    echo "fleet-bench: after 120 s only $(query 'count(up{job="gpud"} == 1)') of $nodes targets are up" >&2
    exit 1
  fi
done
echo "every target up $(since "$t_reload") s after the reload; settling for 60 s"
sleep 60
daemon_cpu() {
  local sum=0 i
  for ((i = 1; i <= nodes; i++)); do sum=$(awk -v s=$sum -v c="$(cpu_seconds "$(cat "$work/node-$i/pid")")" 'BEGIN{print s+c}'); done
  echo "$sum"
}
daemon_rss_mib() {
  local sum=0 i
  for ((i = 1; i <= nodes; i++)); do sum=$((sum + $(rss_kib "$(cat "$work/node-$i/pid")"))); done
  awk -v s=$sum -v n="$nodes" 'BEGIN{printf "%.1f", s/n/1024}'
}
# Prometheus's own counters, from its /metrics (it does not scrape itself here).
prom_metric() {
  curl -sf "http://127.0.0.1:$prom_port/metrics" |
    awk -v m="$1" '$1 == m || index($1, m "{") == 1 {sum += $2} END {printf "%.0f", sum}'
}
p_cpu0=$(cpu_seconds $prom_pid)
d_cpu0=$(daemon_cpu)
appended0=$(prom_metric prometheus_tsdb_head_samples_appended_total)
sleep "$window_s"
p_cpu_per_min=$(awk -v a="$p_cpu0" -v b="$(cpu_seconds $prom_pid)" -v w="$window_s" 'BEGIN{printf "%.3f", (b-a)*60/w}')
d_cpu_per_min=$(awk -v a="$d_cpu0" -v b="$(daemon_cpu)" -v w="$window_s" -v n="$nodes" \
  'BEGIN{printf "%.4f", (b-a)*60/w/n}')
p_rss=$(rss_kib $prom_pid)
series=$(prom_metric prometheus_tsdb_head_series)
ingest=$(awk -v a="$appended0" -v b="$(prom_metric prometheus_tsdb_head_samples_appended_total)" -v w="$window_s" \
  'BEGIN{print (b-a)/w}')
samples=$(query 'avg(scrape_samples_scraped{job="gpud"})')
body=$(query 'avg(scrape_body_size_bytes{job="gpud"})')
scrape_s=$(query 'avg(scrape_duration_seconds{job="gpud"})')
wire=$(curl -sk --compressed -o /dev/null -w '%{size_download}' -H 'Accept-Encoding: gzip' \
  "https://127.0.0.1:${ports[0]}/metrics")

printf '%-52s %s\n' "Prometheus, no target: CPU s/min, RSS" "$idle_cpu_per_min, $(awk -v k="$idle_rss" 'BEGIN{printf "%.1f MiB", k/1024}')"
printf '%-52s %s\n' "Prometheus, $nodes targets: CPU s/min, RSS" "$p_cpu_per_min, $(awk -v k="$p_rss" 'BEGIN{printf "%.1f MiB", k/1024}')"
printf '%-52s %s\n' "per target: CPU ms/min, RSS" "$(awk -v a="$p_cpu_per_min" -v b="$idle_cpu_per_min" -v n="$nodes" 'BEGIN{printf "%.1f", (a-b)*1000/n}'), $(awk -v a="$p_rss" -v b="$idle_rss" -v n="$nodes" 'BEGIN{printf "%.1f KiB", (a-b)/n}')"
printf '%-52s %s\n' "head series (the targets' and the rules')" "$series ($(awk -v s="$series" -v n="$nodes" 'BEGIN{printf "%.0f", s/n}') per target)"
printf '%-52s %s\n' "samples appended per second" "$(awk -v r="$ingest" 'BEGIN{printf "%.0f", r}')"
printf '%-52s %s\n' "per scrape of one node: samples, body, gzip on the wire" "$(awk -v s="$samples" 'BEGIN{printf "%.0f", s}'), $(awk -v b="$body" 'BEGIN{printf "%.1f KiB", b/1024}'), $(awk -v b="$wire" 'BEGIN{printf "%.1f KiB", b/1024}')"
printf '%-52s %s\n' "scrape duration (mean)" "$(awk -v s="$scrape_s" 'BEGIN{printf "%.1f ms", s*1000}')"
printf '%-52s %s\n' "each gpud: CPU s/min, mean RSS" "$d_cpu_per_min, $(daemon_rss_mib) MiB"

# What fires before any fault: on one machine every daemon reads the same host, so a host fault would fire for
# every node (and delay the next notification of each node's group to the group_interval).
firing=$(curl -sf --data-urlencode 'query=count by (alertname, component) (ALERTS{alertstate="firing"})' \
  "http://127.0.0.1:$prom_port/api/v1/query" | python3 -c 'import json,sys
r=json.load(sys.stdin)["data"]["result"]
print(", ".join("%s%s x%s" % (x["metric"].get("alertname"), "{"+x["metric"]["component"]+"}" if "component" in x["metric"] else "", x["value"][1]) for x in r) or "none")')
printf '%-52s %s\n' "alerts firing before the fault" "$firing"

# One Xid 79 on one node's GPU 0: to the alert firing, and to the webhook (the shipped group_wait is 30 s).
target=$(((nodes + 1) / 2))
bus=$(curl -skf "https://127.0.0.1:${ports[target - 1]}/v1/gpus" |
  python3 -c 'import json,sys; print([g for g in json.load(sys.stdin) if g["index"]==0][0]["pci_bus_id"])')
usec=$(awk '{printf "%d", $1*1000000}' /proc/uptime)
before=$(wc -l <"$work/notifications" 2>/dev/null || echo 0)
t_xid=$(now)
printf '3,1,%s,-;NVRM: Xid (PCI:%s): 79, pid=1234, name=python3, GPU has fallen off the bus.\n' "$usec" \
  "${bus%.*}" >>"$work/node-$target/kmsg"
fired="" notified=""
while [[ -z $fired || -z $notified ]] && awk -v s="$(since "$t_xid")" 'BEGIN{exit !(s < 300)}'; do
  if [[ -z $fired && -n $(query "ALERTS{alertname=\"GpuFatalXid\",alertstate=\"firing\",node=\"node-$target\"}") ]]; then
    fired=$(since "$t_xid")
  fi
  if [[ -z $notified ]] && tail -n +$((before + 1)) "$work/notifications" 2>/dev/null |
    grep "\"node\":\"node-$target\"" | grep -q '"alertname":"GpuFatalXid"'; then
    notified=$(since "$t_xid")
  fi
  sleep 0.5
done
others=$(tail -n +$((before + 1)) "$work/notifications" 2>/dev/null | grep -vc "\"node\":\"node-$target\"" || true)
printf '%-52s %s\n' "Xid 79 on node-$target to GpuFatalXid firing" "${fired:-not within 300} s"
printf '%-52s %s\n' "Xid 79 on node-$target to its webhook notification" "${notified:-not within 300} s"
printf '%-52s %s\n' "notifications for other nodes meanwhile" "${others:-0}"
