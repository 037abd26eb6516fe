#!/usr/bin/env bash
# CTest: gpud's container image, run by Debian's dockerd as the DaemonSet runs it, against host roots
# laid out as real GPU nodes are:
#   (a) systemd host: systemd as PID 1 answering on <root>/run/systemd/private, the driver's
#       libraries in /usr/lib/x86_64-linux-gnu, NVML mounted by the NVIDIA container runtime;
#   (b) GPU Operator node: the driver container's root at /run/nvidia/driver (RHEL-style lib64),
#       NVML loaded from there (no --nvml-lib), systemd reached through the system bus socket;
#   (c) containerd with native CDI: enable_cdi = true and an nvidia.com/gpu spec in /var/run/cdi,
#       containerd serving CRI on /run/containerd/containerd.sock, no toolkit pod;
#   (d) k3s: k3s's generated containerd config with the nvidia runtime, its containerd on
#       /run/k3s/containerd/containerd.sock;
#   (e) plain host: no systemd, libraries in /usr/lib64.
# Each has 8 GPUs on its PCI bus (testing/fixtures/host-os/pci-8gpu) and a healthy fake NVML, and
# reads all-Healthy; each has a faulty twin that is found: a watched unit failed (a), a library
# missing from the driver root (b), CDI enabled without an nvidia spec (c), k3s's config without the
# nvidia runtime (d), one GPU missing from NVML (e). The host's /proc is the machine's own; systemd
# and containerd are fakes (gpud_fake_systemd_bus, gpud_cri_fake_server) on the root's sockets.
# Prints what every component reported on every layout. Exits 77 (SKIP) only when no container
# engine can run.
# usage: layouts_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/container/engine.sh
. "$(dirname "$0")/engine.sh"
engine_start "${1:?usage: layouts_test.sh <build dir>}"

fake_nvml=$build/libnvidia-ml.so.1
fake_systemd=$build/gpud_fake_systemd_bus
fake_cri=$build/gpud_cri_fake_server
for f in "$fake_nvml" "$fake_systemd" "$fake_cri"; do [[ -x $f || -f $f ]] || fail "$f not built"; done
fixtures=$src/testing/fixtures

services=()  # the fakes' pids
engine_extra_cleanup() {
  local p
  for p in "${services[@]}"; do kill "$p" 2>/dev/null; done
}

# A scenario of `count` H100s (the fake's default bus ids: those of the PCI fixture).
scenario_of() {
  local path=$tmp/h100x$1.json
  cat >"$path" <<EOF
{"driver": {"version": "550.54.15", "nvml_version": "12.550.54.15", "cuda_version": 12040},
 "count": $1, "defaults": {"name": "NVIDIA H100 80GB HBM3", "cuda_compute_capability": [9, 0]}}
EOF
  echo "$path"
}

# A node's root: the PCI bus with 8 GPUs (and 4 NVSwitches when $4 is "hgx", none for "pcie"), the
# host's identity, /proc to mount the machine's own on, systemd as PID 1 when $2 is "systemd", the
# driver's libraries in $3.
make_root() {
  local root=$tmp/layouts/$1
  mkdir -p "$root"/{proc,etc,run,var/run,dev} "$root$3"
  cp -r "$fixtures/host-os/pci-8gpu/sys" "$root/sys"
  if [[ $4 == pcie ]]; then
    local d
    for d in "$root"/sys/bus/pci/devices/*; do
      [[ $(cat "$d/class") == 0x0680* ]] && rm -rf "$d"
    done
  fi
  local f
  for f in os-release machine-id hostname; do [[ -f /etc/$f ]] && cp "/etc/$f" "$root/etc/"; done
  [[ $2 == systemd ]] && mkdir -p "$root/run/systemd/system"
  : >"$root$3/libcuda.so.1"
  : >"$root$3/libnvidia-ml.so.1"
  echo "$root"
}

# Starts a fake on the root's socket and waits until it serves.
start_service() {
  local socket=$1
  shift
  mkdir -p "$(dirname "$socket")"
  "$@" >"$tmp/service-${#services[@]}.log" 2>&1 &
  services+=($!)
  for _ in $(seq 100); do
    [[ -S $socket ]] && return 0
    sleep 0.05
  done
  fail "$* did not serve $socket: $(cat "$tmp/service-$((${#services[@]} - 1)).log")"
}
stop_services() {
  local p
  for p in "${services[@]}"; do kill "$p" 2>/dev/null && { wait "$p" 2>/dev/null || true; }; done
  services=()
}

units_ok=(containerd.service=active/running kubelet.service=active/running
  nvidia-persistenced.service=active/running)
units_kubelet_failed=(containerd.service=active/running kubelet.service=failed/failed
  nvidia-persistenced.service=active/running)

# gpud in the image on `root` with `gpus` GPUs in NVML, mounted (mode "mounted") or loaded from the
# root's driver libraries ("driver-root"); prints every component's first reading as
# "component<TAB>health<TAB>reason", sorted.
states_on() {
  local name=$1 root=$2 gpus=$3 nvml=$4
  local container=gpud-layout-$name-$RANDOM scenario
  scenario=$(scenario_of "$gpus")
  mkdir -p "$tmp/state-$container"
  : >"$tmp/kmsg-$container"
  local volumes=(-v "$root:/host:ro" -v /proc:/host/proc:ro -v "$tmp/state-$container:/var/lib/gpud"
    -v "$tmp/kmsg-$container:/dev/kmsg" -v "$scenario:/opt/gpud-test/scenario.json:ro"
    -e FAKE_NVML_SCENARIO=/opt/gpud-test/scenario.json)
  local args=(--nvidia-check-interval=1s)
  if [[ $nvml == mounted ]]; then
    volumes+=(-v "$fake_nvml:/opt/gpud-test/libnvidia-ml.so.1:ro")
    args+=(--nvml-lib=/opt/gpud-test/libnvidia-ml.so.1)
  fi
  run_gpud "$container" "${volumes[@]}" -- "${args[@]}"
  local url states=
  url=$(wait_for_url "$container")
  # Every component past its first check (none Initializing), within 30 s.
  for _ in $(seq 150); do
    states=$(curl -sk --max-time 5 "$url/v1/states" || true)
    if [[ -n $states ]] && jq -e 'length > 0 and all(.[]; .states[0].health != "Initializing")' \
      <<<"$states" >/dev/null 2>&1; then
      break
    fi
    sleep 0.2
  done
  docker rm -f "$container" >/dev/null
  jq -r '.[] | [.component, .states[0].health, .states[0].reason] | @tsv' <<<"$states" | sort
}

# Prints the layout's table and checks every component Healthy.
expect_all_healthy() {
  local layout=$1 table=$2
  echo "== $layout"
  sed 's/^/   /' <<<"$table"
  local bad
  bad=$(awk -F'\t' '$2 != "Healthy"' <<<"$table")
  [[ -z $bad ]] || fail "$layout: not all Healthy: $bad"
}

# The table's row of `component` ("" when it has none).
row_of() { awk -F'\t' -v c="$2" '$1 == c' <<<"$1"; }

# Checks that `component`'s reason contains `text`.
expect_reason() {
  local layout=$1 table=$2 component=$3 text=$4 row
  row=$(row_of "$table" "$component")
  [[ -n $row ]] || fail "$layout: no $component component: $table"
  [[ $(cut -f3 <<<"$row") == *"$text"* ]] || fail "$layout: $component's reason lacks '$text': $row"
}

# Checks that `component` reads `health` with a reason containing `text`.
expect_component() {
  local layout=$1 table=$2 component=$3 health=$4 text=$5 row
  row=$(row_of "$table" "$component")
  echo "== $layout (faulty twin): $row"
  expect_reason "$layout" "$table" "$component" "$text"
  [[ $(cut -f2 <<<"$row") == "$health" ]] || fail "$layout: $component is not $health: $row"
}

# (a) systemd host.
root=$(make_root systemd-host systemd /usr/lib/x86_64-linux-gnu pcie)
start_service "$root/run/systemd/private" "$fake_systemd" "$root/run/systemd/private" systemd \
  "${units_ok[@]}"
table=$(states_on systemd-host "$root" 8 mounted)
expect_all_healthy "(a) systemd host" "$table"
expect_reason "(a) systemd host" "$table" systemd \
  "containerd.service active, kubelet.service active, nvidia-persistenced.service active"
stop_services
start_service "$root/run/systemd/private" "$fake_systemd" "$root/run/systemd/private" systemd \
  "${units_kubelet_failed[@]}"
table=$(states_on systemd-host "$root" 8 mounted)
expect_component "(a) systemd host" "$table" systemd Unhealthy "unit kubelet.service failed"
stop_services

# (b) GPU Operator node, an HGX one: NVML and the fabric manager are the driver root's own, the
# fabric manager answering on 127.0.0.1:6666 (the host's network).
lib=/run/nvidia/driver/usr/lib64
root=$(make_root gpu-operator systemd "$lib" hgx)
cp "$fake_nvml" "$root$lib/libnvidia-ml.so.1"
mkdir -p "$root/run/nvidia/driver/usr/bin"
printf '#!/bin/sh\n' >"$root/run/nvidia/driver/usr/bin/nv-fabricmanager"
chmod +x "$root/run/nvidia/driver/usr/bin/nv-fabricmanager"
if ! (exec 3<>/dev/tcp/127.0.0.1/6666) 2>/dev/null; then
  busybox nc -ll -p 6666 -e /bin/true >"$tmp/fabric-manager.log" 2>&1 &
  services+=($!)
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/6666) 2>/dev/null && break
    sleep 0.05
  done
fi
start_service "$root/run/dbus/system_bus_socket" "$fake_systemd" "$root/run/dbus/system_bus_socket" \
  bus "${units_ok[@]}"
table=$(states_on gpu-operator "$root" 8 driver-root)
expect_all_healthy "(b) GPU Operator node" "$table"
expect_reason "(b) GPU Operator node" "$table" accelerator-nvidia-gpu-counts \
  "nvidia gpu count 8 matches the 8 GPUs on the PCI bus"
expect_reason "(b) GPU Operator node" "$table" accelerator-nvidia-fabric-manager \
  "fabric manager found and active"
rm "$root$lib/libcuda.so.1"
table=$(states_on gpu-operator "$root" 8 driver-root)
expect_component "(b) GPU Operator node" "$table" library Unhealthy \
  'library "libcuda.so.1" does not exist'
stop_services

# (c) containerd with native CDI, and (d) k3s: containerd's CRI on the root's socket.
containerd_layout() {
  local name=$1 fixture=$2 socket=$3
  local root
  root=$(make_root "$name" none /usr/lib/x86_64-linux-gnu pcie)
  cp -r "$fixtures/containerd/$fixture/." "$root/"
  start_service "$root$socket" "$fake_cri" runtime "$root$socket"
  states_on "$name" "$root" 8 mounted
  stop_services
}
table=$(containerd_layout native-cdi host-native-cdi /run/containerd/containerd.sock)
expect_all_healthy "(c) containerd with native CDI" "$table"
expect_reason "(c) containerd with native CDI" "$table" containerd "containerd is running"
table=$(containerd_layout native-cdi-no-spec host-cdi-no-nvidia-spec /run/containerd/containerd.sock)
expect_component "(c) containerd with native CDI" "$table" containerd Unhealthy \
  "enables CDI, but no nvidia.com/gpu CDI spec is in /etc/cdi or /var/run/cdi"

table=$(containerd_layout k3s host-k3s /run/k3s/containerd/containerd.sock)
expect_all_healthy "(d) k3s" "$table"
expect_reason "(d) k3s" "$table" containerd "containerd is running"
table=$(containerd_layout k3s-no-nvidia host-k3s-no-nvidia /run/k3s/containerd/containerd.sock)
expect_component "(d) k3s" "$table" containerd Unhealthy \
  "k3s's containerd config /var/lib/rancher/k3s/agent/etc/containerd/config.toml configures no nvidia runtime"

# (e) plain host.
root=$(make_root plain none /usr/lib64 pcie)
table=$(states_on plain "$root" 8 mounted)
expect_all_healthy "(e) plain host" "$table"
table=$(states_on plain "$root" 7 mounted)
expect_component "(e) plain host" "$table" accelerator-nvidia-gpu-counts Unhealthy \
  "not seen by NVML: 0000:db:00.0"

echo "PASS: the image read each node layout truthfully"
