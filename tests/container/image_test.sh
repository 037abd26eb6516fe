#!/usr/bin/env bash
# CTest: builds gpud's container image (scripts/build-image.sh), loads it into Debian's dockerd
# started with a private root, exec root and socket, and runs it as the DaemonSet does
# (deploy/kubernetes/daemonset.yaml: privileged, host PID, host network and UTS, the host's / at
# /host read-only with --host-root=/host, the state directory on a host path, /dev/kmsg from the
# host). Checks: /healthz answers; /machine-info reports the host's hostname, kernel, machine id and
# OS (the image has no /etc/machine-id or /etc/os-release of its own); an Xid 79 appended to the
# kernel log the container reads (a private file mounted at /dev/kmsg) makes
# accelerator-nvidia-error-xid Unhealthy; SIGTERM stops it cleanly; a new container on the same
# state directory still knows the Xid. NVML is the fake one (build/libnvidia-ml.so.1), mounted into
# the container as the NVIDIA container runtime would mount the real one.
#
# Prints the image size and the daemon's resident memory and CPU use (the DaemonSet's requests
# come from these). Exits 77 (SKIP) only when no container engine can run: docker.io missing, not
# root, or dockerd failing to start (the reason is printed).
# usage: image_test.sh <build dir>
set -euo pipefail

# shellcheck source=tests/container/engine.sh
. "$(dirname "$0")/engine.sh"
engine_start "${1:?usage: image_test.sh <build dir>}"
size=$(docker image inspect -f '{{.Size}}' "$image")
compressed=$(stat -c %s "$tmp/image/gpud-image.tar")
echo "image $image: $((size / 1024 / 1024)) MiB unpacked, $((compressed / 1024 / 1024)) MiB as a tarball"
# A stripped binary and its libraries (36 MiB with the CRI module's 13 MiB, bash, busybox and
# libsystemd for sd-bus): an unstripped one or a stray file would be several times this.
((size < 40 * 1024 * 1024)) || fail "the image is $size bytes, over 40 MiB"
[[ $(docker image inspect -f '{{json .Config.Entrypoint}}' "$image") == '["/usr/bin/gpud"]' ]] ||
  fail "entrypoint: $(docker image inspect -f '{{json .Config.Entrypoint}}' "$image")"

# The host side of the DaemonSet's volumes.
mkdir -p "$tmp/state"
: >"$tmp/kmsg"
scenario=$src/testing/fixtures/nvml/h100x8-healthy.json
fake_nvml=$build/libnvidia-ml.so.1
[[ -f $fake_nvml ]] || fail "$fake_nvml not built"

# The DaemonSet's settings (deploy/kubernetes/daemonset.yaml; tests/kubernetes checks the manifest
# has exactly these) with this machine's / as the host.
run_daemonset() {
  run_gpud "$1" -v /:/host:ro -v "$tmp/state:/var/lib/gpud" -v "$tmp/kmsg:/dev/kmsg" \
    -v "$fake_nvml:/opt/gpud-test/libnvidia-ml.so.1:ro" -v "$scenario:/opt/gpud-test/scenario.json:ro" \
    -e FAKE_NVML_SCENARIO=/opt/gpud-test/scenario.json -- --nvml-lib=/opt/gpud-test/libnvidia-ml.so.1
}

run_daemonset gpud-image-test
url=$(wait_for_url gpud-image-test)
healthz=$(curl -sk --max-time 5 "$url/healthz")
[[ $(jq -r .status <<<"$healthz") == ok ]] || fail "/healthz: $healthz"

# The plain-HTTP metrics-only listener the DaemonSet's PodMonitor scrapes (--metrics-listen-address).
for _ in $(seq 50); do
  metrics_port=$(docker logs gpud-image-test 2>&1 |
    sed -n 's/.*serving \/metrics over plain http on .* (port \([0-9]*\)).*/\1/p' | head -1)
  [[ -n $metrics_port ]] && break
  sleep 0.1
done
[[ -n $metrics_port ]] || fail "no plain-http metrics listener: $(docker logs gpud-image-test 2>&1 | tail -5)"
plain=$(curl -s --max-time 5 "http://127.0.0.1:$metrics_port/metrics")
[[ $plain == *'accelerator_nvidia_temperature_current_celsius{gpu="0"'* ]] ||
  fail "plain-http /metrics has no GPU series: ${plain:0:300}"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$metrics_port/v1/states")
[[ $code == 404 ]] || fail "the metrics-only listener answered /v1/states with $code, not 404"

# The host's identity, read through /host.
info=$(curl -sk --max-time 5 "$url/machine-info")
expect_field() {
  local got
  got=$(jq -r ".$1" <<<"$info")
  [[ $got == "$2" ]] || fail "/machine-info .$1 is '$got', the host's is '$2' ($info)"
}
expect_field hostname "$(hostname)"
expect_field kernelVersion "$(uname -r)"
expect_field bootID "$(cat /proc/sys/kernel/random/boot_id)"
if [[ -s /etc/machine-id ]]; then expect_field machineID "$(cat /etc/machine-id)"; fi
if [[ -f /etc/os-release ]]; then
  expect_field osImage "$(. /etc/os-release && echo "$PRETTY_NAME")"
fi
[[ $(jq -r .gpuInfo.product <<<"$info") == "NVIDIA-H100-80GB-HBM3" ]] ||
  fail "NVML (the fake, mounted) not seen: $info"

# An Xid 79 on GPU 0 in the kernel log the container follows: a raw /dev/kmsg record stamped now.
bus=$(curl -sk --max-time 5 "$url/metrics" |
  sed -n 's/^accelerator_nvidia_temperature_current_celsius{gpu="0",.*pci_bus_id="\([^"]*\)".*/\1/p')
[[ -n $bus ]] || fail "no GPU 0 in /metrics"
usec=$(awk '{printf "%d", $1 * 1000000}' /proc/uptime)
echo "4,1,$usec,-;NVRM: Xid (PCI:${bus%.*}): 79, pid=1, name=x, test." >>"$tmp/kmsg"
xid_state() {
  curl -sk --max-time 5 "$1/v1/states?components=accelerator-nvidia-error-xid" |
    jq -c '.[0].states[0] | {health, reason, actions: .suggested_actions.repair_actions}'
}
for _ in $(seq 100); do
  state=$(xid_state "$url")
  [[ $(jq -r .health <<<"$state") == Unhealthy ]] && break
  sleep 0.1
done
[[ $(jq -r .health <<<"$state") == Unhealthy ]] || fail "the Xid did not make the component Unhealthy: $state"
[[ $(jq -r .reason <<<"$state") == *"XID 79"*"$bus"* ]] || fail "reason: $state"
[[ $(jq -r '.actions[0]' <<<"$state") == REBOOT_SYSTEM ]] || fail "suggested action: $state"
echo "Xid 79 on $bus: $state"

# Footprint of the daemon as the DaemonSet runs it (8 fake GPUs): resident memory and CPU over 5 s.
pid=$(docker inspect -f '{{.State.Pid}}' gpud-image-test)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
t0=$(ticks)
sleep 5
t1=$(ticks)
rss_kib=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
hz=$(getconf CLK_TCK)
echo "footprint: VmRSS $((rss_kib / 1024)) MiB, CPU $(((t1 - t0) * 1000 / hz)) ms in 5 s (idle)"

# SIGTERM (docker stop, as the kubelet stops a pod) ends it cleanly.
docker stop -t 10 gpud-image-test >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' gpud-image-test)
[[ $code == 0 ]] || fail "exit code $code after SIGTERM: $(docker logs gpud-image-test 2>&1 | tail -5)"
[[ -f $tmp/state/gpud.state && -f $tmp/state/gpud.crt ]] || fail "no state in the host directory: $(ls "$tmp/state")"

# A new container (a pod replaced by a rolling update) on the same host directory keeps the Xid,
# from the state database only: the kernel log it reads is empty now.
: >"$tmp/kmsg"
run_daemonset gpud-image-test-2
url=$(wait_for_url gpud-image-test-2)
for _ in $(seq 100); do
  state=$(xid_state "$url")
  [[ $(jq -r .health <<<"$state") == Unhealthy ]] && break
  sleep 0.1
done
[[ $(jq -r .health <<<"$state") == Unhealthy ]] || fail "the new container lost the Xid: $state"
docker stop -t 10 gpud-image-test-2 >/dev/null
echo "PASS: $image ran as the DaemonSet runs it"
