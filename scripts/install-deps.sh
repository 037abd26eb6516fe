#!/usr/bin/env bash
# Installs the Debian packages one use of gpud needs, by set:
#   build  (make build, make run, make deb, make image): the compiler, the libraries, the tools that package gpud
#   test   (make test, make bench): build, plus the real programs the tests and benchmarks start themselves
#          (Prometheus, Alertmanager, node_exporter, containerd, dockerd, nginx, chromium, kubectl, FUSE, Slurm
#          with munge)
#   asan   (make test-asan, make fuzz): test, plus clang-14 with its sanitizer and libFuzzer runtimes and lld
#   arm64  (make build-arm64, make test-arm64, make deb-arm64, make image): build, plus Debian's cross toolchain for
#          arm64, qemu-user-static to run its tests, and the :arm64 libraries (docs/ARM64.md)
# Idempotent: it installs only what is missing and runs `apt-get update` at most once, only when something has
# to be installed. No service is started on the host: the install runs under a policy-rc.d that refuses every
# start (Debian's convention, invoke-rc.d(8)), and the units of the packages it installed are not enabled either;
# the tests start the programs they need with private sockets, ports and data directories.
#   install-deps.sh [build|test|asan|arm64]        install a set (default: build)
#   install-deps.sh --list [build|test|asan|arm64]  print the set's packages, one per line, and install nothing
#   install-deps.sh --list-test-only          the programs test and asan add to build (to remove them again)
set -euo pipefail

build_packages=(
  build-essential cmake pkg-config g++ ccache
  libcpp-httplib-dev libssl-dev nlohmann-json3-dev libsqlite3-dev libcli11-dev
  libspdlog-dev libfmt-dev libre2-dev libyaml-cpp-dev
  # sd-bus (header; libsystemd.so.0 is loaded on first use): the systemd component asks the host's systemd over
  # D-Bus when gpud runs in a container; the tests' fake systemd links it.
  libsystemd-dev
  # CMake configures the unit tests and the benchmarks with the rest (headers and static libraries only).
  libgtest-dev libgmock-dev libbenchmark-dev
  # The container-runtime client modules: the CRI and pod-resources clients (gRPC, our own .proto files) and
  # the docker Engine client (libcurl over the unix socket).
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libcurl4-openssl-dev
  # testing/hung_fuse (a FUSE file system whose statfs hangs) is configured with the build.
  libfuse3-dev
  # `gpud scan --kernel-log-tz Europe/Berlin` reads the zone's rules from /usr/share/zoneinfo.
  tzdata
  # `make deb`: CPack's DEB generator computes Depends with dpkg-shlibdeps, which finds ELF files with file(1).
  dpkg-dev file
  # `make image` assembles the OCI image with umoci (jq edits its index) and puts busybox's shell in it.
  umoci jq busybox-static
)
# The web UI: its build needs Node.js and npm (a node from elsewhere, e.g. NodeSource's package that bundles npm,
# is fine, so Debian's are added only when the commands are missing).
command -v node >/dev/null 2>&1 || build_packages+=(nodejs)
command -v npm >/dev/null 2>&1 || build_packages+=(npm)

# Command-line tools the tests call that most hosts have anyway (ca-certificates needs openssl): never listed
# for removal.
test_utility_packages=(sqlite3 openssl curl procps)
test_only_packages=(
  # The rules and fleet tests run promtool, Prometheus, Alertmanager; `make bench` measures node_exporter.
  prometheus prometheus-node-exporter prometheus-alertmanager
  # `make bench` loads the API with wrk beside nginx serving a static file over TLS.
  wrk nginx-light
  # The image and runtime tests start a private dockerd and containerd with a busybox image.
  docker.io containerd
  # A hung FUSE mount shows that no check waits on a mount that does not answer.
  fuse3
  # The UI's browser test.
  chromium
  # The Slurm test starts a private munged, slurmctld and slurmd and drains its node through
  # `gpud slurm-health-check` (scontrol and sinfo are slurm-client's).
  munge slurmctld slurmd slurm-client
)
# The manifests test renders deploy/kubernetes with `kubectl kustomize`: any kubectl does (one from elsewhere,
# e.g. Google Cloud's `kubectl` package, conflicts with Debian's kubernetes-client).
command -v kubectl >/dev/null 2>&1 || test_only_packages+=(kubernetes-client)

asan_only_packages=(
  clang-14
  # libFuzzer's and the sanitizers' runtimes for clang-14.
  libclang-rt-14-dev
  # The sanitizer build links with lld (CMakeLists.txt: a fraction of GNU ld's time for its large binaries).
  lld-14
)

# The arm64 cross build (cmake/toolchain-aarch64-linux-gnu.cmake): Debian's cross compiler, and the arm64 build of
# every library of the build set, installed beside the amd64 ones (Multi-Arch: same); the host's protoc,
# grpc_cpp_plugin, node and npm serve both builds. qemu-user-static runs the arm64 tests (`make test-arm64`).
# The image's arm64 half takes the libraries gpud, its CRI module, bash and libsystemd load (libtinfo6 for bash).
arm64_only_packages=(
  crossbuild-essential-arm64 qemu-user-static
  libcpp-httplib-dev:arm64 libssl-dev:arm64 libsqlite3-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64
  libre2-dev:arm64 libsystemd-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libbenchmark-dev:arm64
  libgrpc++-dev:arm64 libprotobuf-dev:arm64 libcurl4-openssl-dev:arm64 libfuse3-dev:arm64
  libyaml-cpp0.7:arm64 libtinfo6:arm64
)
# What cannot sit beside its amd64 twin: libyaml-cpp-dev is not Multi-Arch (dpkg would remove the amd64 one), and
# bash and busybox-static are the host's own programs. Their arm64 packages are downloaded and unpacked into
# $arm64_root (not installed with dpkg): the toolchain file finds yaml-cpp's static library there, and
# scripts/build-image.sh takes bash and busybox for the image's arm64 half.
arm64_unpacked_packages=(libyaml-cpp-dev bash busybox-static)
arm64_root=${GPUD_ARM64_ROOT:-/opt/gpud-cross/arm64}

set_packages() {
  case "$1" in
    build) printf '%s\n' "${build_packages[@]}" ;;
    test) printf '%s\n' "${build_packages[@]}" "${test_utility_packages[@]}" "${test_only_packages[@]}" ;;
    asan)
      printf '%s\n' "${build_packages[@]}" "${test_utility_packages[@]}" "${test_only_packages[@]}" \
        "${asan_only_packages[@]}"
      ;;
    arm64) printf '%s\n' "${build_packages[@]}" "${arm64_only_packages[@]}" ;;
    *)
      echo "install-deps: unknown set '$1' (build, test, asan or arm64)" >&2
      return 2
      ;;
  esac
}

case "${1:-build}" in
  --list)
    set_packages "${2:-build}"
    exit
    ;;
  --list-test-only)
    printf '%s\n' "${test_only_packages[@]}" "${asan_only_packages[@]}"
    exit
    ;;
esac
set_packages "${1:-build}" >/dev/null
mapfile -t packages < <(set_packages "${1:-build}")

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done
add_arm64_architecture=0
unpack_missing=()
if [[ ${1:-build} == arm64 ]]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || add_arm64_architecture=1
  for p in "${arm64_unpacked_packages[@]}"; do
    [[ -e $arm64_root/.unpacked/$p ]] || unpack_missing+=("$p")
  done
fi

if ((${#missing[@]} == 0 && ${#unpack_missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
else
  SUDO=
fi

# invoke-rc.d and deb-systemd-invoke ask /usr/sbin/policy-rc.d before they start a service; 101 is "action
# forbidden". One that is already there is the administrator's own and stays as it is.
policy_rc_d=${GPUD_DEPS_POLICY_RC_D:-/usr/sbin/policy-rc.d}
placed_policy=0
remove_policy() {
  if ((placed_policy)); then $SUDO rm -f "$policy_rc_d"; fi
}
if [[ ! -e $policy_rc_d ]]; then
  trap remove_policy EXIT
  printf '#!/bin/sh\n# scripts/install-deps.sh (gpud): no service starts while it installs packages.\nexit 101\n' |
    $SUDO tee "$policy_rc_d" >/dev/null
  $SUDO chmod 0755 "$policy_rc_d"
  placed_policy=1
fi

export DEBIAN_FRONTEND=noninteractive
if ((add_arm64_architecture)); then
  echo "install-deps: adding the arm64 architecture to dpkg (dpkg --add-architecture arm64)"
  $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -qq
if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  # --no-install-recommends keeps the prometheus packages from pulling a web stack we do not use.
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ((${#unpack_missing[@]} > 0)); then
  echo "install-deps: unpacking ${unpack_missing[*]} (arm64) into $arm64_root"
  download=$(mktemp -d)
  chmod 0777 "$download"  # apt-get download fetches as the unprivileged _apt user
  for p in "${unpack_missing[@]}"; do
    (cd "$download" && apt-get download -qq "$p:arm64")
    deb=$(ls "$download/${p}_"*_arm64.deb)
    $SUDO mkdir -p "$arm64_root/.unpacked"
    $SUDO dpkg-deb -x "$deb" "$arm64_root"
    dpkg-deb -f "$deb" Package Version | $SUDO tee "$arm64_root/.unpacked/$p" >/dev/null
  done
  rm -rf "$download"
fi

# Packages enable their units for the next boot even when policy-rc.d forbids starting them now: on a host that
# runs systemd, the units of the packages installed here (and only those) are disabled again.
if [[ -d ${GPUD_DEPS_SYSTEMD_DIR:-/run/systemd/system} ]] && command -v systemctl >/dev/null 2>&1; then
  units=()
  for p in "${missing[@]}"; do
    while IFS= read -r f; do
      case "$f" in
        /lib/systemd/system/*.service | /lib/systemd/system/*.socket | /usr/lib/systemd/system/*.service | \
          /usr/lib/systemd/system/*.socket)
          [[ $f == *@.* ]] || units+=("${f##*/}")
          ;;
      esac
    done < <(dpkg -L "$p" 2>/dev/null || true)
  done
  if ((${#units[@]} > 0)); then
    echo "install-deps: not enabling ${units[*]} (the tests start what they need themselves)"
    $SUDO systemctl disable --quiet "${units[@]}" || true
  fi
fi
