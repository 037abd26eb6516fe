#!/usr/bin/env bash
# Builds gpud's container image without a base image: the root file system is the built gpud binary
# and its CRI client module (stripped), bash and busybox's tools for custom plugins, the shared
# libraries they load (and the glibc libraries a host's libnvidia-ml.so.1 needs when the NVIDIA
# container runtime injects it), an /etc/passwd with root, and empty /tmp, /host and /var/lib/gpud. Debian's umoci writes it as an OCI image layout; a docker-archive
# manifest.json beside index.json lets `docker load` (Docker 20.10 reads only that) take the same
# tarball that podman, skopeo and `ctr images import` read as OCI.
#
# One image per build folder given, each for the architecture its gpud was built for (amd64, or
# arm64 from the cross build, cmake/toolchain-aarch64-linux-gnu.cmake), gathered in an OCI image
# index tagged <version>: `ctr images import` (and any OCI runtime) takes the one of its machine's
# platform. Docker 20.10's manifest.json holds the first build's image as gpud:<version> and the
# others as gpud:<version>-<arch> (it knows no platforms).
#
# usage: build-image.sh <build dir> [<output dir> [<another build dir>...]]
#   (default output: <build dir>/image)
# Writes <output>/gpud-image.tar (the image, tag gpud:<version>) and <output>/oci (the layout).
# It packages what was built and never rebuilds: `make image` builds gpud first.
set -euo pipefail
shopt -s inherit_errexit

build=${1:?usage: build-image.sh <build dir> [<output dir> [<another build dir>...]]}
out=${2:-$build/image}
builds=("$build" "${@:3}")
src=$(cd "$(dirname "$0")/.." && pwd)
for tool in umoci jq readelf sha256sum; do
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
host_arch=$(dpkg --print-architecture)
# Where scripts/install-deps.sh arm64 unpacked the arm64 bash and busybox.
arm64_root=${GPUD_ARM64_ROOT:-/opt/gpud-cross/arm64}

rm -rf "$out/rootfs" "$out/oci" "$out/gpud-image.tar"
mkdir -p "$out"
rootfs=$out/rootfs
oci=$out/oci
umoci init --layout "$oci"

# The Debian architecture and multiarch triplet of an ELF file.
elf_arch() {
  case $(readelf -h "$1" | sed -n 's/^ *Machine: *//p') in
    *X86-64*) echo "amd64 x86_64-linux-gnu" ;;
    AArch64) echo "arm64 aarch64-linux-gnu" ;;
    *) echo "build-image: $1 is for an architecture the image does not know" >&2; return 1 ;;
  esac
}

# Every shared library the given ELF files load, resolved recursively from their DT_NEEDED entries in
# the Debian multiarch directories of the triplet (readelf, so a cross-built binary resolves too);
# the program interpreter, which libc names too, is left to the caller.
needed_libraries() {
  local triplet=$1 interp=$2
  shift 2
  local -A seen=(["$(basename "$interp")"]=1)
  local queue=("$@") file name dir found
  while ((${#queue[@]} > 0)); do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    while read -r name; do
      [[ -n $name && -z ${seen[$name]:-} ]] || continue
      seen[$name]=1
      found=
      for dir in /usr/lib/$triplet /lib/$triplet /usr/lib /lib; do
        if [[ -e $dir/$name ]]; then found=$dir/$name; break; fi
      done
      [[ -n $found ]] || { echo "build-image: $name (needed by $file) not found for $triplet" >&2; return 1; }
      echo "$found"
      queue+=("$found")
    done < <(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
  done
}

# Assembles one architecture's root file system from a build folder and adds it to the layout as the
# image tagged <version>-<arch>; prints "<arch> <manifest digest> <manifest size>".
add_image() {
  local build=$1 gpud=$1/gpud arch triplet strip_tool bash_bin busybox_bin list_applets
  [[ -x $gpud ]] || { echo "build-image: $gpud not built (make image builds it)" >&2; return 1; }
  read -r arch triplet < <(elf_arch "$gpud")
  [[ -n $arch ]] || return 1
  if [[ $arch == "$host_arch" ]]; then
    strip_tool="strip"
    bash_bin=$(readlink -f /bin/bash)
    busybox_bin=$(readlink -f /bin/busybox)
    list_applets=("$busybox_bin" --list)
  else
    # Another architecture's tools: the cross binutils' strip, and bash and busybox of that
    # architecture's Debian packages (scripts/install-deps.sh arm64), whose applets qemu lists.
    strip_tool=$triplet-strip
    bash_bin=$arm64_root/bin/bash
    busybox_bin=$arm64_root/bin/busybox
    list_applets=(qemu-aarch64-static "$busybox_bin" --list)
    [[ $arch == arm64 ]] || { echo "build-image: no tools for $arch on $host_arch" >&2; return 1; }
  fi
  for tool in "$strip_tool" "${list_applets[0]}"; do
    command -v "$tool" >/dev/null || {
      echo "build-image: $tool missing (scripts/install-deps.sh $arch installs it)" >&2
      return 1
    }
  done

  rm -rf "$rootfs"
  # A merged-/usr layout as Debian 12's: /lib, /lib64, /bin are links into /usr.
  mkdir -p "$rootfs"/usr/{bin,lib/"$triplet",lib64} "$rootfs"/{etc,host,var/lib/gpud}
  install -d -m 1777 "$rootfs/tmp"
  ln -s usr/lib "$rootfs/lib"
  ln -s usr/lib64 "$rootfs/lib64"
  ln -s usr/bin "$rootfs/bin"
  printf 'root:x:0:0:root:/root:/usr/bin/gpud\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\n' >"$rootfs/etc/group"

  "$strip_tool" --strip-unneeded -o "$rootfs/usr/bin/gpud" "$gpud"

  # Custom plugins (docs/PLUGINS.md) run their steps with /bin/bash, and their scripts use the usual
  # tools: Debian's bash (its libraries join the others below) and busybox-static's applets (sh, awk,
  # grep, sed, cat, ...; one 2 MiB static binary), each applet a link unless the image has the name.
  for tool in "$bash_bin" "$busybox_bin"; do
    [[ -x $tool ]] || { echo "build-image: $tool missing (scripts/install-deps.sh installs it)" >&2; return 1; }
  done
  cp "$bash_bin" "$rootfs/usr/bin/bash"
  cp "$busybox_bin" "$rootfs/usr/bin/busybox"
  local applet
  for applet in $("${list_applets[@]}"); do
    [[ -e $rootfs/usr/bin/$applet || -L $rootfs/usr/bin/$applet ]] || ln -s busybox "$rootfs/usr/bin/$applet"
  done

  # The CRI client module (libgpud-cri.so: CRI and pod-resources over gRPC, 13 MiB of libraries) in
  # /usr/lib/gpud, where gpud looks (../lib/gpud beside it): the DaemonSet sees the host's containerd
  # and pod-resources sockets under /host, and loads it only where one exists. The docker module is
  # left out (another 10 MiB for libcurl's): a Kubernetes node runs containerd, and the image does
  # not mount the docker socket.
  local modules=() module
  for module in "$build"/libgpud-cri.so; do
    [[ -f $module ]] || { echo "build-image: $module not built (make image builds it)" >&2; return 1; }
    modules+=("$module")
    mkdir -p "$rootfs/usr/lib/gpud"
    "$strip_tool" --strip-unneeded -o "$rootfs/usr/lib/gpud/$(basename "$module")" "$module"
  done

  # Every library the binary and the modules load, at its own path under /usr, resolved to the real
  # file, and the program interpreter named in the binary (/lib64/ld-linux-x86-64.so.2,
  # /lib/ld-linux-aarch64.so.1).
  # libsystemd.so.0, which gpud loads (dlopen) to ask the node's systemd over D-Bus, and what it links.
  local sd_bus_lib=/usr/lib/$triplet/libsystemd.so.0
  [[ -e $sd_bus_lib ]] || { echo "build-image: $sd_bus_lib not found (Debian's libsystemd0)" >&2; return 1; }
  local interp
  interp=$(readelf -l "$gpud" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  local libs=()
  mapfile -t libs < <(needed_libraries "$triplet" "$interp" "$gpud" "${modules[@]}" "$bash_bin" "$sd_bus_lib" |
    sort -u)
  libs+=("$sd_bus_lib" "$interp")
  local libc_dir='' lib dest
  for lib in "${libs[@]}"; do
    [[ $lib == */libc.so.6 ]] && libc_dir=$(dirname "$lib")
  done
  [[ -n $libc_dir ]] || { echo "build-image: no libc found for $gpud" >&2; return 1; }
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
      *) echo "build-image: unexpected library path $lib" >&2; return 1 ;;
    esac
    mkdir -p "$(dirname "$dest")"
    cp -L "$lib" "$dest"
  done
  [[ -e $rootfs$interp ]] || { echo "build-image: interpreter $interp not in the image" >&2; return 1; }
  find "$rootfs" -exec touch -h -d "@$epoch" {} +

  local tag=$version-$arch
  umoci new --image "$oci:$tag" >&2
  umoci insert --image "$oci:$tag" --history.created "$created" \
    --history.created_by "scripts/build-image.sh: gpud and its shared libraries" "$rootfs" / >&2
  # The DaemonSet (deploy/kubernetes/daemonset.yaml) passes its own arguments; these defaults run
  # gpud as it does there. NVIDIA_* make the NVIDIA container runtime inject NVML (utility).
  umoci config --image "$oci:$tag" --created "$created" --history.created "$created" \
    --history.created_by "scripts/build-image.sh: configuration" \
    --author "gpud maintainers" --architecture "$arch" --os linux \
    --config.entrypoint /usr/bin/gpud \
    --config.cmd run --config.cmd --host-root=/host --config.cmd --data-dir=/var/lib/gpud \
    --config.env PATH=/usr/bin \
    --config.env NVIDIA_VISIBLE_DEVICES=all --config.env NVIDIA_DRIVER_CAPABILITIES=utility \
    --config.exposedports 15132/tcp --config.workingdir / \
    --config.label org.opencontainers.image.title=gpud \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.description=GPU node health daemon" >&2
  rm -rf "$rootfs"
  echo "$arch"
}

blob() { echo "blobs/${1/://}"; }
archs=()
for b in "${builds[@]}"; do
  arch=$(add_image "$b")
  for seen in "${archs[@]}"; do
    [[ $seen != "$arch" ]] || { echo "build-image: two builds for $arch" >&2; exit 1; }
  done
  archs+=("$arch")
done
umoci gc --layout "$oci"

# The image index: one manifest per platform (arm64 as variant v8, as registries write it), stored as
# a blob; index.json then names only it, as <version> and (for containerd's `ctr images import`,
# which names an OCI image by this annotation) docker.io/library/gpud:<version>.
declare -A manifest_descriptors=()
for arch in "${archs[@]}"; do
  manifest_descriptors[$arch]=$(jq -c --arg tag "$version-$arch" \
    '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $tag) | del(.annotations)' \
    "$oci/index.json")
done
manifest_of() { echo "${manifest_descriptors[$1]}"; }
platform_manifests=()
for arch in "${archs[@]}"; do
  platform=$(jq -cn --arg arch "$arch" '{architecture: $arch, os: "linux"} +
    (if $arch == "arm64" then {variant: "v8"} else {} end)')
  platform_manifests+=("$(manifest_of "$arch" | jq -c --argjson p "$platform" '. + {platform: $p}')")
done
image_index=$(printf '%s\n' "${platform_manifests[@]}" | jq -cs \
  '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: .}')
index_digest=sha256:$(printf '%s' "$image_index" | sha256sum | cut -d' ' -f1)
printf '%s' "$image_index" >"$oci/$(blob "$index_digest")"
jq -n --arg digest "$index_digest" --argjson size "$(printf '%s' "$image_index" | wc -c)" \
  --arg ref "$version" --arg name "docker.io/library/$image_name" \
  '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{mediaType: "application/vnd.oci.image.index.v1+json", digest: $digest, size: $size,
                 annotations: {"org.opencontainers.image.ref.name": $ref,
                               "io.containerd.image.name": $name}}]}' >"$oci/index.json"

# Docker 20.10's `docker load` reads manifest.json (docker-archive) and not index.json: point it at
# the same blobs, so one tarball is both. The first build's image is gpud:<version>.
docker_entries=()
for arch in "${archs[@]}"; do
  manifest=$(jq -r '.digest' <<<"$(manifest_of "$arch")")
  config=$(jq -r '.config.digest' "$oci/$(blob "$manifest")")
  tag=$image_name
  [[ $arch == "${archs[0]}" ]] || tag=$image_name-$arch
  docker_entries+=("$(jq -cn --arg config "$(blob "$config")" --arg tag "$tag" \
    --argjson layers "$(jq '[.layers[].digest | sub(":"; "/") | "blobs/" + .]' "$oci/$(blob "$manifest")")" \
    '{Config: $config, RepoTags: [$tag], Layers: $layers}')")
done
printf '%s\n' "${docker_entries[@]}" | jq -s . >"$oci/manifest.json"

tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -C "$oci" -cf "$out/gpud-image.tar" oci-layout index.json manifest.json blobs

# One line per platform, the first's last (the tests read the last line).
for i in $(seq $((${#archs[@]} - 1)) -1 0); do
  arch=${archs[$i]}
  manifest=$(jq -r '.digest' <<<"$(manifest_of "$arch")")
  layers_bytes=$(jq '[.layers[].size] | add' "$oci/$(blob "$manifest")")
  rootfs_bytes=$(tar -xOf "$out/gpud-image.tar" "$(jq -r ".[$i].Layers[0]" "$oci/manifest.json")" |
    gzip -dc | wc -c)
  echo "build-image: $out/gpud-image.tar ($image_name, linux/$arch): $(numfmt --to=iec "$layers_bytes")" \
    "compressed, $(numfmt --to=iec "$rootfs_bytes") uncompressed layer"
done
