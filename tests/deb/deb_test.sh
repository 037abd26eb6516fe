#!/usr/bin/env bash
# Builds the Debian package with CPack into a temporary directory and checks it: file name,
# control metadata, contents, the conffile, and that the extracted (staged) binary runs.
# Usage: deb_test.sh BUILD_DIR VERSION. Exit 77 (skipped) when cpack or dpkg-deb is missing.
set -euo pipefail

build=${1:?usage: deb_test.sh BUILD_DIR VERSION}
version=${2:?usage: deb_test.sh BUILD_DIR VERSION}

for tool in cpack dpkg-deb dpkg-shlibdeps; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed (scripts/install-deps.sh installs it)"
    exit 77
  fi
done

tmp=$(mktemp -d /tmp/gpud-deb-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Packages what the build already made (the test runs after the build).
(cd "$build" && cpack -G DEB -B "$tmp/out" --config CPackConfig.cmake >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; fail "cpack failed"; }

deb="$tmp/out/gpud_${version}_amd64.deb"
[[ -f $deb ]] || { ls -la "$tmp/out"; cat "$tmp/cpack.log"; fail "no $deb"; }

info=$(dpkg-deb -I "$deb")
echo "$info"
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == gpud ]] || fail "Package is '$(field Package)'"
[[ $(field Version) == "$version" ]] || fail "Version is '$(field Version)', want $version"
[[ $(field Architecture) == amd64 ]] || fail "Architecture is '$(field Architecture)'"
[[ -n $(field Maintainer) ]] || fail "no Maintainer"
[[ $(field Description) == *"GPU node health daemon"* ]] || fail "Description: $(field Description)"
# dpkg-shlibdeps computed Depends from the binary's libraries.
depends=$(field Depends)
[[ $depends == *libc6* ]] || fail "Depends '$depends' does not name libc6"
[[ $depends == *libssl3* ]] || fail "Depends '$depends' does not name libssl3"
[[ $depends == *libcpp-httplib* ]] || fail "Depends '$depends' does not name libcpp-httplib"
# SQLite and RE2 are linked statically where their archives are installed (docs/DESIGN.md).
if [[ -f /usr/lib/x86_64-linux-gnu/libsqlite3.a ]]; then
  [[ $depends != *libsqlite3* ]] || fail "Depends '$depends' names libsqlite3, which is linked in"
fi

contents=$(dpkg-deb -c "$deb")
echo "$contents"
for path in ./usr/bin/gpud ./lib/systemd/system/gpud.service ./etc/default/gpud ./etc/gpud/gpud.yaml \
  ./usr/lib/gpud/gpud-slurm-health-check; do
  grep -qE " ${path//./\\.}\$" <<<"$contents" || fail "package lacks $path"
done
if [[ -f $(dirname "$0")/../../deploy/prometheus/gpud-alerts.yml ]]; then
  grep -qE ' \./usr/share/gpud/gpud-alerts\.yml$' <<<"$contents" ||
    fail "package lacks /usr/share/gpud/gpud-alerts.yml"
fi
for example in dcgm-compat-rules.yml gpud-fleet-rules.yml alertmanager.yml gpud-fleet.json slurm.conf.gpud; do
  grep -qE " \./usr/share/gpud/${example//./\\.}\$" <<<"$contents" ||
    fail "package lacks /usr/share/gpud/$example"
done
grep -q 'rwxr-xr-x root/root .* \./usr/bin/gpud$' <<<"$contents" || fail "gpud is not 0755 root"
grep -q 'rwxr-xr-x root/root .* \./usr/lib/gpud/gpud-slurm-health-check$' <<<"$contents" ||
  fail "the Slurm health check wrapper is not 0755 root"
# It may hold the admin token (GPUD_ADMIN_TOKEN).
grep -q 'rw-r----- root/root .* \./etc/default/gpud$' <<<"$contents" ||
  fail "/etc/default/gpud is not 0640 root"
# No test binaries or fake NVML libraries.
if grep -qE 'libnvidia-ml|_tests' <<<"$contents"; then fail "test files in the package"; fi

# /etc/default/gpud and /etc/gpud/gpud.yaml are conffiles, so upgrades keep local changes.
dpkg-deb -e "$deb" "$tmp/control"
grep -qx /etc/default/gpud "$tmp/control/conffiles" || fail "/etc/default/gpud is not a conffile"
grep -qx /etc/gpud/gpud.yaml "$tmp/control/conffiles" || fail "/etc/gpud/gpud.yaml is not a conffile"

# Extract into a staged root and check the files.
root="$tmp/root"
dpkg-deb -x "$deb" "$root"
"$root/usr/bin/gpud" version | grep -q "^gpud $version " || fail "staged gpud version failed"
grep -qx 'ExecStart=/usr/bin/gpud run $FLAGS' "$root/lib/systemd/system/gpud.service" ||
  fail "packaged unit does not run /usr/bin/gpud"
grep -qx 'Type=notify' "$root/lib/systemd/system/gpud.service" || fail "packaged unit not Type=notify"
grep -qx 'FLAGS=""' "$root/etc/default/gpud" || fail "packaged /etc/default/gpud has no FLAGS"
# The shipped configuration is the commented default, which the packaged binary reads as such.
cmp -s "$root/etc/gpud/gpud.yaml" "$(dirname "$0")/../../deploy/config/gpud.yaml" ||
  fail "packaged /etc/gpud/gpud.yaml is not deploy/config/gpud.yaml"
"$root/usr/bin/gpud" scan --config "$root/etc/gpud/gpud.yaml" --components cpu --log-level error \
  >/dev/null || fail "the packaged binary does not read the packaged configuration"
# Install it with dpkg into a second staged root (its own dpkg database; the libraries it depends on
# are not in that database, hence --force-depends; no maintainer scripts, so no chroot is needed).
if [[ $(id -u) -eq 0 ]] && command -v dpkg >/dev/null 2>&1; then
  inst="$tmp/dpkg-root"
  mkdir -p "$inst/var/lib/dpkg/info" "$inst/var/lib/dpkg/updates"
  touch "$inst/var/lib/dpkg/status"
  dpkg_root() { dpkg --root="$inst" --force-script-chrootless --log=/dev/null "$@"; }
  dpkg_root --force-depends -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
  dpkg_root -s gpud | grep -qx 'Status: install ok installed' || fail "dpkg does not list gpud"
  "$inst/usr/bin/gpud" version | grep -q "^gpud $version " || fail "dpkg-installed gpud failed"
  # Removing keeps the conffile; purging deletes it.
  dpkg_root -r gpud >>"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -r"; }
  [[ ! -e $inst/usr/bin/gpud && -f $inst/etc/default/gpud ]] || fail "dpkg -r: binary or conffile"
  dpkg_root -P gpud >>"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -P"; }
  [[ ! -e $inst/etc/default/gpud ]] || fail "dpkg -P left /etc/default/gpud"
  [[ ! -e $inst/etc/gpud/gpud.yaml ]] || fail "dpkg -P left /etc/gpud/gpud.yaml"
else
  echo "note: not root or no dpkg; skipped the dpkg --root install check (dpkg-deb checks ran)"
fi
echo "PASS: $deb"
