#!/usr/bin/env bash
# The API's throughput and tail latency beside nginx, measured in the same run with the same wrk
# settings (2 threads, keep-alive TLS): nginx (Debian's nginx-light) serving a static 16-byte file,
# gpud's /healthz, and gpud's /v1/states with eight fake GPUs, each at 4 and 32 connections.
# Targets: /healthz >= 0.25 x nginx's requests/s with p99 <= 5 ms at 32 connections; /v1/states
# >= 2,000 requests/s. Usage: bench/http-bench.sh [build dir]; HTTP_BENCH_S sets each run's seconds.
set -euo pipefail
build=${1:-build}
gpud=$build/gpud
seconds=${HTTP_BENCH_S:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -x $gpud ]] || { echo "http-bench: $gpud missing; run make first" >&2; exit 2; }
for tool in wrk nginx openssl curl; do
  command -v $tool >/dev/null 2>&1 || { echo "http-bench: $tool missing; run scripts/install-deps.sh" >&2; exit 2; }
done

work=$(mktemp -d /tmp/gpud-http-bench-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# nginx: the same kind of certificate as gpud's (ECDSA P-256), one static file, no access log.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost \
  -keyout "$work/nginx.key" -out "$work/nginx.crt" >/dev/null 2>&1
mkdir -p "$work/www"
printf '{"status":"ok"}\n' >"$work/www/healthz"
chmod 755 "$work" "$work/www"  # nginx's workers run as nobody
nport=$(free_port)
cat >"$work/nginx.conf" <<EOF
daemon off;
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $work/body; proxy_temp_path $work/proxy; fastcgi_temp_path $work/fastcgi;
  uwsgi_temp_path $work/uwsgi; scgi_temp_path $work/scgi;
  server {
    listen 127.0.0.1:$nport ssl;
    ssl_certificate $work/nginx.crt;
    ssl_certificate_key $work/nginx.key;
    root $work/www;
    default_type application/json;
  }
}
EOF
nginx -c "$work/nginx.conf" -e "$work/nginx-error.log" &
pids+=($!)

# gpud on eight fake H100s (testing/fake_nvml), warnings only.
gport=$(free_port)
gpud_args=(run --listen-address 127.0.0.1:$gport --data-dir "$work/gpud" --log-level warn)
if [[ -f $build/libnvidia-ml.so.1 ]]; then
  export FAKE_NVML_SCENARIO=$root/testing/fixtures/nvml/h100x8-healthy.json
  gpud_args+=(--nvml-lib "$build/libnvidia-ml.so.1")
fi
$gpud "${gpud_args[@]}" 2>"$work/gpud.log" &
pids+=($!)

until curl -skf "https://127.0.0.1:$nport/healthz" >/dev/null 2>&1; do sleep 0.05; done
until curl -skf "https://127.0.0.1:$gport/healthz" >/dev/null 2>&1; do sleep 0.05; done
sleep 2  # the first checks land in the cache

# One wrk run: prints "requests/s p99".
measure() {
  local out rps p99
  out=$(wrk -t2 -c"$2" -d"${seconds}s" --latency "$1" 2>&1)
  rps=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
  p99=$(awk '$1=="99%"{print $2}' <<<"$out")
  if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
    echo "$out" | grep 'Non-2xx\|Socket errors' >&2
  fi
  echo "${rps:-0} ${p99:-?}"
}

printf '%-46s %14s %10s\n' "(wrk -t2, ${seconds} s, keep-alive TLS)" "requests/s" "p99"
declare -A rps
for row in "nginx static 16-byte file|https://127.0.0.1:$nport/healthz" \
           "gpud /healthz|https://127.0.0.1:$gport/healthz" \
           "gpud /v1/states (eight fake GPUs)|https://127.0.0.1:$gport/v1/states"; do
  name=${row%%|*}; url=${row#*|}
  for c in 4 32; do
    read -r r p < <(measure "$url" "$c")
    rps["$name/$c"]=$r
    printf '%-46s %14s %10s\n' "$name, $c connections" "$r" "$p"
  done
done
echo "gpud /healthz / nginx at 32 connections: $(awk -v a="${rps["gpud /healthz/32"]}" \
  -v b="${rps["nginx static 16-byte file/32"]}" 'BEGIN{printf "%.2f", (b > 0 ? a / b : 0)}') (target >= 0.25)"
echo "gpud /v1/states at 32 connections: ${rps["gpud /v1/states (eight fake GPUs)/32"]} requests/s (target >= 2000)"
