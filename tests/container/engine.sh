# Sourced by the container-image tests (image_test.sh, layouts_test.sh): gpud's image built from
# the build directory (scripts/build-image.sh), Debian's dockerd started on private paths, and gpud
# run as the DaemonSet runs it (deploy/kubernetes/daemonset.yaml: privileged, host PID, host
# network and UTS, a host root at /host read-only with --host-root=/host, the state directory on a
# host path, the kernel log from the host, NVML mounted as the NVIDIA container runtime mounts it).
# Exits 77 (SKIP) only when no container engine can run here, with the reason.
#
# engine_start <build dir>   sets tmp (removed at exit), image and the docker function
# run_gpud NAME [docker run settings...] [-- gpud run arguments...]
# wait_for_url NAME          prints the https address the daemon serves on

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

engine_start() {
  build=${1:?engine_start <build dir>}
  build=$(cd "$build" && pwd)
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  dockerd=${DOCKERD:-/usr/sbin/dockerd}
  docker_cli=${DOCKER:-/usr/bin/docker}
  [[ -x $dockerd && -x $docker_cli ]] ||
    skip "$dockerd or $docker_cli not installed (scripts/install-deps.sh installs Debian's docker.io)"
  [[ $(id -u) -eq 0 ]] || skip "dockerd needs root"
  command -v umoci >/dev/null || skip "umoci not installed (scripts/install-deps.sh installs it)"

  tmp=$(mktemp -d /tmp/gpud-image-test-XXXXXX)
  sock=$tmp/docker.sock
  engine_containers=()
  trap engine_cleanup EXIT

  # The image, built from what the build made (never rebuilding gpud).
  "$src/scripts/build-image.sh" "$build" "$tmp/image" | tail -1
  local version
  version=$(sed -n 's/^project(gpud VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
  image=gpud:$version

  # dockerd on private paths: no bridge or iptables rules (the container uses the host's network);
  # its own containerd (under the exec root) in its own namespace.
  local name
  name=$(basename "$tmp")
  "$dockerd" --data-root "$tmp/root" --exec-root "$tmp/exec" --pidfile "$tmp/dockerd.pid" \
    -H "unix://$sock" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
    --containerd-namespace "$name" --containerd-plugins-namespace "$name-plugins" \
    --log-level=warn >"$tmp/dockerd.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do
    docker version >/dev/null 2>&1 && break
    if ! kill -0 "$pid" 2>/dev/null; then
      skip "dockerd could not start: $(tail -3 "$tmp/dockerd.log" | tr '\n' ' ')"
    fi
    sleep 0.1
  done
  docker version >/dev/null 2>&1 ||
    skip "dockerd did not answer within 30 s: $(tail -3 "$tmp/dockerd.log" | tr '\n' ' ')"

  # Docker 20.10 reads the tarball's manifest.json (the same blobs are an OCI layout too).
  local loaded
  loaded=$(docker load -i "$tmp/image/gpud-image.tar")
  [[ $loaded == *"Loaded image: $image"* ]] || fail "docker load: $loaded"
}

docker() { "$docker_cli" -H "unix://$sock" "$@"; }

engine_cleanup() {
  set +e
  if [[ -S $sock ]]; then
    local c
    for c in "${engine_containers[@]}"; do docker rm -f "$c" >/dev/null 2>&1; done
  fi
  if [[ -f $tmp/dockerd.pid ]]; then
    local pid
    pid=$(cat "$tmp/dockerd.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
  fi
  # Whatever the test started besides (fake host services), then what dockerd left mounted.
  if declare -F engine_extra_cleanup >/dev/null; then engine_extra_cleanup; fi
  grep -o " $tmp/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$tmp"
}

# `privileged` needs every capability of the kernel: where this machine's bounding set lacks one
# (sandboxes drop CAP_SYS_RESOURCE), runc cannot grant it, and the container runs with privileged's
# parts instead: every capability the machine has, no seccomp or AppArmor profile, unmasked /proc
# and /sys.
run_gpud() {
  local container=$1
  shift
  local settings=() args=(run --host-root=/host --data-dir=/var/lib/gpud
    --listen-address=127.0.0.1:0 --metrics-listen-address=127.0.0.1:0)
  while (($#)) && [[ $1 != -- ]]; do
    settings+=("$1")
    shift
  done
  if (($#)); then
    shift
    args+=("$@")
  fi
  settings=(--pid host --network host --uts host "${settings[@]}")
  engine_containers+=("$container")
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
  if [[ -z ${engine_caps_noted:-} ]]; then
    engine_caps_noted=1
    echo "NOTE: runc cannot grant --privileged on this machine: its capability bounding set lacks" \
      "${missing[*]:-a capability newer than Docker knows}; running with privileged's parts instead:" \
      "the other $((${#caps[@]} / 2)) capabilities, no seccomp or AppArmor profile, unmasked /proc and /sys" >&2
  fi
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
