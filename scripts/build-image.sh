#!/usr/bin/env bash
# Builds gpud's container image without a base image: the root file system is the built gpud binary
# and its CRI client module (stripped), bash and busybox's tools for custom plugins, the shared
# libraries they load (and the glibc libraries a host's libnvidia-ml.so.1 needs when the NVIDIA
# container runtime injects it), an /etc/passwd with root, and empty /tmp, /host and /var/lib/gpud. Debian's umoci writes it as an OCI image layout; a docker-archive
# manifest.json beside index.json lets `docker load` (Docker 20.10 reads only that) take the same
# tarball that podman, skopeo and `ctr images import` read as OCI.
#
# usage: build-image.sh <build dir> [<output dir>]   (default output: <build dir>/image)
# Writes <output>/gpud-image.tar (the image, tag gpud:<version>) and <output>/oci (the layout).
# It packages what was built and never rebuilds: `make image` builds gpud first.
set -euo pipefail

build=${1:?usage: build-image.sh <build dir> [<output dir>]}
out=${2:-$build/image}
src=$(cd "$(dirname "$0")/.." && pwd)
gpud=$build/gpud
[[ -x $gpud ]] || { echo "build-image: $gpud not built (make image builds it)" >&2; exit 1; }
for tool in umoci jq ldd strip; do
  command -v "$tool" >/dev/null || {
    echo "build-image: $tool missing (scripts/install-deps.sh installs it)" >&2
    exit 1
  }
done
# umoci records file owners as they are on disk: the image's files must belong to root.
[[ $(id -u) -eq 0 ]] || { echo "build-image: run as root (umoci keeps file owners)" >&2; exit 1; }

version=$(sed -n 's/^project(gpud VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ -n $version ]] || { echo "build-image: no version in CMakeLists.txt" >&2; exit 1; }
image_name=gpud:$version
# Reproducible timestamps: the last commit's time (SOURCE_DATE_EPOCH when set).
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

rm -rf "$out/rootfs" "$out/oci" "$out/gpud-image.tar"
mkdir -p "$out"
rootfs=$out/rootfs

# A merged-/usr layout as Debian 12's: /lib, /lib64, /bin are links into /usr.
mkdir -p "$rootfs"/usr/{bin,lib/x86_64-linux-gnu,lib64} "$rootfs"/{etc,host,var/lib/gpud}
install -d -m 1777 "$rootfs/tmp"
ln -s usr/lib "$rootfs/lib"
ln -s usr/lib64 "$rootfs/lib64"
ln -s usr/bin "$rootfs/bin"
printf 'root:x:0:0:root:/root:/usr/bin/gpud\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\n' >"$rootfs/etc/group"

strip --strip-unneeded -o "$rootfs/usr/bin/gpud" "$gpud"

# Custom plugins (docs/PLUGINS.md) run their steps with /bin/bash, and their scripts use the usual
# tools: Debian's bash (its libraries join the others below) and busybox-static's applets (sh, awk,
# grep, sed, cat, ...; one 2 MiB static binary), each applet a link unless the image has the name.
bash_bin=$(readlink -f /bin/bash)
busybox_bin=$(readlink -f /bin/busybox)
for tool in "$bash_bin" "$busybox_bin"; do
  [[ -x $tool ]] || { echo "build-image: $tool missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
cp "$bash_bin" "$rootfs/usr/bin/bash"
cp "$busybox_bin" "$rootfs/usr/bin/busybox"
for applet in $("$busybox_bin" --list); do
  [[ -e $rootfs/usr/bin/$applet || -L $rootfs/usr/bin/$applet ]] || ln -s busybox "$rootfs/usr/bin/$applet"
done

# The CRI client module (libgpud-cri.so: CRI and pod-resources over gRPC, 13 MiB of libraries) in
# /usr/lib/gpud, where gpud looks (../lib/gpud beside it): the DaemonSet sees the host's containerd
# and pod-resources sockets under /host, and loads it only where one exists. The docker module is
# left out (another 10 MiB for libcurl's): a Kubernetes node runs containerd, and the image does
# not mount the docker socket.
modules=()
for module in "$build"/libgpud-cri.so; do
  [[ -f $module ]] || { echo "build-image: $module not built (make image builds it)" >&2; exit 1; }
  modules+=("$module")
  mkdir -p "$rootfs/usr/lib/gpud"
  strip --strip-unneeded -o "$rootfs/usr/lib/gpud/$(basename "$module")" "$module"
done

# Every library the binary and the modules load, at its own path under /usr, resolved to the real
# file.
# libsystemd.so.0, which gpud loads (dlopen) to ask the node's systemd over D-Bus, and what it links.
sd_bus_lib=$(ldconfig -p | sed -n 's/^[[:space:]]*libsystemd\.so\.0 (libc6,x86-64) => \(.*\)$/\1/p' | head -1)
[[ -n $sd_bus_lib ]] || { echo "build-image: libsystemd.so.0 not found (Debian's libsystemd0)" >&2; exit 1; }
mapfile -t libs < <(for elf in "$gpud" "${modules[@]}" "$bash_bin" "$sd_bus_lib"; do ldd "$elf"; done |
  sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p' | sort -u)
libs+=("$sd_bus_lib")
libc_dir=
for lib in "${libs[@]}"; do
  [[ $lib == */libc.so.6 ]] && libc_dir=$(dirname "$lib")
done
[[ -n $libc_dir ]] || { echo "build-image: ldd found no libc for $gpud" >&2; exit 1; }
# NVML (the host's, injected by the NVIDIA container runtime, or the fake one in tests) links
# against these glibc libraries, which gpud itself may not load.
for extra in libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1; do
  [[ -e $libc_dir/$extra ]] && libs+=("$libc_dir/$extra")
done
for lib in "${libs[@]}"; do
  case $lib in
    /lib64/*) dest=$rootfs/usr/lib64/${lib#/lib64/} ;;
    /lib/*) dest=$rootfs/usr/lib/${lib#/lib/} ;;
    /usr/*) dest=$rootfs$lib ;;
    *) echo "build-image: unexpected library path $lib" >&2; exit 1 ;;
  esac
  mkdir -p "$(dirname "$dest")"
  cp -L "$lib" "$dest"
done
# The program interpreter named in the binary (/lib64/ld-linux-x86-64.so.2) must resolve.
interp=$(readelf -l "$gpud" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[[ -e $rootfs$interp ]] || { echo "build-image: interpreter $interp not in the image" >&2; exit 1; }
find "$rootfs" -exec touch -h -d "@$epoch" {} +

oci=$out/oci
tag=$version
umoci init --layout "$oci"
umoci new --image "$oci:$tag"
umoci insert --image "$oci:$tag" --history.created "$created" \
  --history.created_by "scripts/build-image.sh: gpud and its shared libraries" "$rootfs" /
# The DaemonSet (deploy/kubernetes/daemonset.yaml) passes its own arguments; these defaults run
# gpud as it does there. NVIDIA_* make the NVIDIA container runtime inject NVML (utility).
umoci config --image "$oci:$tag" --created "$created" --history.created "$created" \
  --history.created_by "scripts/build-image.sh: configuration" \
  --author "gpud maintainers" --architecture amd64 --os linux \
  --config.entrypoint /usr/bin/gpud \
  --config.cmd run --config.cmd --host-root=/host --config.cmd --data-dir=/var/lib/gpud \
  --config.env PATH=/usr/bin \
  --config.env NVIDIA_VISIBLE_DEVICES=all --config.env NVIDIA_DRIVER_CAPABILITIES=utility \
  --config.exposedports 15132/tcp --config.workingdir / \
  --config.label org.opencontainers.image.title=gpud \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.description=GPU node health daemon"
umoci gc --layout "$oci"

# containerd (`ctr images import`) names an OCI image by this annotation.
jq --arg name "docker.io/library/$image_name" \
  '.manifests[0].annotations["io.containerd.image.name"] = $name' "$oci/index.json" >"$oci/index.json.new"
mv "$oci/index.json.new" "$oci/index.json"
# Docker 20.10's `docker load` reads manifest.json (docker-archive) and not index.json: point it at
# the same blobs, so one tarball is both.
manifest=$(jq -r '.manifests[0].digest' "$oci/index.json")
blob() { echo "blobs/${1/://}"; }
config=$(jq -r '.config.digest' "$oci/$(blob "$manifest")")
jq -n --arg config "$(blob "$config")" --arg tag "$image_name" \
  --argjson layers "$(jq '[.layers[].digest | sub(":"; "/") | "blobs/" + .]' "$oci/$(blob "$manifest")")" \
  '[{Config: $config, RepoTags: [$tag], Layers: $layers}]' >"$oci/manifest.json"

tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -C "$oci" -cf "$out/gpud-image.tar" oci-layout index.json manifest.json blobs
rm -rf "$rootfs"

layers_bytes=$(jq '[.layers[].size] | add' "$oci/$(blob "$manifest")")
rootfs_bytes=$(tar -xOf "$out/gpud-image.tar" "$(jq -r '.[0].Layers[0]' "$oci/manifest.json")" |
  gzip -dc | wc -c)
echo "build-image: $out/gpud-image.tar ($image_name): $(numfmt --to=iec "$layers_bytes") compressed," \
  "$(numfmt --to=iec "$rootfs_bytes") uncompressed layer"
