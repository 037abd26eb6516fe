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

build=${1:?usage: image_test.sh <build dir>}
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
dockerd=${DOCKERD:-/usr/sbin/dockerd}
docker_cli=${DOCKER:-/usr/bin/docker}

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ -x $dockerd && -x $docker_cli ]] ||
  skip "$dockerd or $docker_cli not installed (scripts/install-deps.sh installs Debian's docker.io)"
[[ $(id -u) -eq 0 ]] || skip "dockerd needs root"
command -v umoci >/dev/null || skip "umoci not installed (scripts/install-deps.sh installs it)"

tmp=$(mktemp -d /tmp/gpud-image-test-XXXXXX)
sock=$tmp/docker.sock
docker() { "$docker_cli" -H "unix://$sock" "$@"; }
cleanup() {
  set +e
  if [[ -S $sock ]]; then
    docker rm -f gpud-image-test gpud-image-test-2 >/dev/null 2>&1
  fi
  if [[ -f $tmp/dockerd.pid ]]; then
    local pid
    pid=$(cat "$tmp/dockerd.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  # What dockerd leaves mounted under its private roots.
  grep -o " $tmp/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# The image, built from what the build made (never rebuilding gpud).
"$src/scripts/build-image.sh" "$build" "$tmp/image" | tail -1
version=$(sed -n 's/^project(gpud VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
image=gpud:$version

# dockerd on private paths: no bridge or iptables rules (the container uses the host's network);
# its own containerd (under the exec root) in its own namespace.
name=$(basename "$tmp")
"$dockerd" --data-root "$tmp/root" --exec-root "$tmp/exec" --pidfile "$tmp/dockerd.pid" \
  -H "unix://$sock" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
  --containerd-namespace "$name" --containerd-plugins-namespace "$name-plugins" \
  --log-level=warn >"$tmp/dockerd.log" 2>&1 &
for _ in $(seq 300); do
  docker version >/dev/null 2>&1 && break
  if ! kill -0 $! 2>/dev/null; then
    skip "dockerd could not start: $(tail -3 "$tmp/dockerd.log" | tr '\n' ' ')"
  fi
  sleep 0.1
done
docker version >/dev/null 2>&1 || skip "dockerd did not answer within 30 s: $(tail -3 "$tmp/dockerd.log" | tr '\n' ' ')"

# Docker 20.10 reads the tarball's manifest.json (the same blobs are an OCI layout too).
loaded=$(docker load -i "$tmp/image/gpud-image.tar")
[[ $loaded == *"Loaded image: $image"* ]] || fail "docker load: $loaded"
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
# has exactly these). `privileged` needs every capability of the kernel: where this machine's
# bounding set lacks one (sandboxes drop CAP_SYS_RESOURCE), runc cannot grant it, and the test
# runs with privileged's parts instead: every capability the machine has, no seccomp or AppArmor
# profile, unmasked /proc and /sys.
run_gpud() {
  local container=$1
  shift
  local settings=(--pid host --network host --uts host
    -v /:/host:ro -v "$tmp/state:/var/lib/gpud" -v "$tmp/kmsg:/dev/kmsg"
    -v "$fake_nvml:/opt/gpud-test/libnvidia-ml.so.1:ro" -v "$scenario:/opt/gpud-test/scenario.json:ro"
    -e FAKE_NVML_SCENARIO=/opt/gpud-test/scenario.json)
  local args=(run --host-root=/host --data-dir=/var/lib/gpud --listen-address=127.0.0.1:0
    --metrics-listen-address=127.0.0.1:0 --nvml-lib=/opt/gpud-test/libnvidia-ml.so.1)
  local out
  if out=$(docker run -d --name "$container" --privileged "${settings[@]}" "$image" "${args[@]}" 2>&1); then
    return 0
  fi
  [[ $out == *"unable to apply caps"* ]] || fail "docker run --privileged: $out"
  docker rm -f "$container" >/dev/null 2>&1 || true
  # Docker 20.10 knows the capabilities 0 (CHOWN) to 37 (AUDIT_READ), in this order.
  local names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
    LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE
    SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME
    SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG
    WAKE_ALARM BLOCK_SUSPEND AUDIT_READ)
  local bounding caps=() missing=() i
  bounding=$((16#$(awk '/^CapBnd/ {print $2}' /proc/self/status)))
  for i in "${!names[@]}"; do
    if (((bounding >> i) & 1)); then caps+=(--cap-add "${names[i]}"); else missing+=("${names[i]}"); fi
  done
  echo "NOTE: runc cannot grant --privileged on this machine: its capability bounding set lacks" \
    "${missing[*]:-a capability newer than Docker knows}; running with privileged's parts instead:" \
    "the other $((${#caps[@]} / 2)) capabilities, no seccomp or AppArmor profile, unmasked /proc and /sys"
  out=$(docker run -d --name "$container" "${caps[@]}" --security-opt seccomp=unconfined \
    --security-opt apparmor=unconfined --security-opt systempaths=unconfined \
    "${settings[@]}" "$image" "${args[@]}" 2>&1) || fail "docker run: $out"
}

# The address the daemon reports once it serves (it picked a free port).
wait_for_url() {
  local container=$1 line
  for _ in $(seq 300); do
    line=$(docker logs "$container" 2>&1 | grep -o 'serving https on 127.0.0.1:[0-9]*' | head -1) || true
    if [[ -n $line ]]; then
      echo "https://${line#serving https on }"
      return 0
    fi
    [[ $(docker inspect -f '{{.State.Running}}' "$container") == true ]] ||
      fail "the container exited: $(docker logs "$container" 2>&1 | tail -20)"
    sleep 0.1
  done
  fail "gpud did not serve within 30 s: $(docker logs "$container" 2>&1 | tail -20)"
}

run_gpud gpud-image-test
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
run_gpud gpud-image-test-2
url=$(wait_for_url gpud-image-test-2)
for _ in $(seq 100); do
  state=$(xid_state "$url")
  [[ $(jq -r .health <<<"$state") == Unhealthy ]] && break
  sleep 0.1
done
[[ $(jq -r .health <<<"$state") == Unhealthy ]] || fail "the new container lost the Xid: $state"
docker stop -t 10 gpud-image-test-2 >/dev/null
echo "PASS: $image ran as the DaemonSet runs it"
