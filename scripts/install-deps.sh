#!/usr/bin/env bash
# Installs the Debian packages gpud needs to build, test and benchmark. Idempotent: it installs only what is
# missing and runs `apt-get update` at most once, only when something has to be installed.
set -euo pipefail

packages=(
  build-essential cmake pkg-config g++ clang-14 ccache
  # `make fuzz`: libFuzzer's runtime for clang-14.
  libclang-rt-14-dev
  # The sanitizer build links with lld (CMakeLists.txt: a fraction of GNU ld's time for its large binaries).
  lld-14
  libcpp-httplib-dev libssl-dev nlohmann-json3-dev libsqlite3-dev libcli11-dev
  libspdlog-dev libfmt-dev libre2-dev libyaml-cpp-dev
  # sd-bus (header; libsystemd.so.0 is loaded on first use): the systemd component asks the host's
  # systemd over D-Bus when gpud runs in a container; the tests' fake systemd links it.
  libsystemd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  sqlite3 openssl curl procps
  prometheus prometheus-node-exporter
  # `make bench` loads the API with wrk beside nginx serving a static file over TLS.
  wrk nginx-light
  # `make deb`: CPack's DEB generator computes Depends with dpkg-shlibdeps, which finds ELF files
  # with file(1).
  dpkg-dev file
  # `make image` assembles the OCI image with umoci (jq edits its index); the image test and the
  # fleet tests run it in Docker and alert through Alertmanager.
  umoci jq docker.io prometheus-alertmanager
  # A hung FUSE mount (testing/hung_fuse) shows that no check waits on a mount that does not answer.
  libfuse3-dev fuse3
  # The container-runtime components: the CRI and pod-resources clients (gRPC, our own .proto files)
  # and the docker Engine client (libcurl over the unix socket) live in optional modules; their
  # tests start Debian's containerd and dockerd with a busybox image made from busybox-static.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libcurl4-openssl-dev
  containerd busybox-static
  # `gpud scan --kernel-log-tz Europe/Berlin` reads the zone's rules from /usr/share/zoneinfo.
  tzdata
)

# The manifests test renders deploy/kubernetes with `kubectl kustomize`: any kubectl does (one from
# elsewhere, e.g. Google Cloud's `kubectl` package, conflicts with Debian's kubernetes-client).
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)

# The web UI: its build needs Node.js and npm (a node from elsewhere, e.g. NodeSource's package that
# bundles npm, is fine, so Debian's are added only when the commands are missing); its browser test
# drives Debian's chromium.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
packages+=(chromium)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
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

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends keeps the prometheus packages from pulling a web stack we do not use.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
