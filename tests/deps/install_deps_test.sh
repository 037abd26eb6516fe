#!/usr/bin/env bash
# scripts/install-deps.sh on a machine where nothing is installed (dpkg-query and apt-get replaced by fakes that
# record what they are asked): the build set asks for no test tool, the test set asks for them, the arm64 set
# adds the architecture and unpacks what cannot be co-installed, and every
# install runs under a policy-rc.d that forbids starting services, which is gone again afterwards.
set -euo pipefail
src=${1:?usage: install_deps_test.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/systemd"
cat >"$work/bin/dpkg-query" <<'FAKE'
#!/bin/sh
exit 1
FAKE
# The fake apt-get records its arguments and, for an install, whether policy-rc.d forbade starting services.
cat >"$work/bin/apt-get" <<'FAKE'
#!/bin/sh
echo "$*" >>"$FAKE_LOG"
case "$1" in download)
  for p in "$@"; do case "$p" in *:arm64) : >"${p%:arm64}_1.0_arm64.deb" ;; esac; done
esac
case "$*" in *install*)
  if [ -x "$GPUD_DEPS_POLICY_RC_D" ]; then "$GPUD_DEPS_POLICY_RC_D" docker start; echo "policy-rc.d=$?" >>"$FAKE_LOG"
  else echo "policy-rc.d=absent" >>"$FAKE_LOG"; fi
esac
FAKE
cat >"$work/bin/dpkg" <<'FAKE'
#!/bin/sh
[ "$1" = -L ] && [ "$2" = docker.io ] && printf '/usr/bin/dockerd\n/lib/systemd/system/docker.service\n/lib/systemd/system/docker.socket\n/lib/systemd/system/getty@.service\n'
[ "$1" = --add-architecture ] && echo "dpkg $*" >>"$FAKE_LOG"
exit 0
FAKE
# Unpacking records what it was given; the fields are the fake download's.
cat >"$work/bin/dpkg-deb" <<'FAKE'
#!/bin/sh
echo "dpkg-deb $*" >>"$FAKE_LOG"
[ "$1" = -f ] && printf 'Package: %s\nVersion: 1.0\n' "$(basename "$2" | cut -d_ -f1)"
exit 0
FAKE
cat >"$work/bin/systemctl" <<'FAKE'
#!/bin/sh
echo "systemctl $*" >>"$FAKE_LOG"
FAKE
chmod +x "$work"/bin/*
export PATH="$work/bin:$PATH" GPUD_DEPS_POLICY_RC_D="$work/policy-rc.d" GPUD_DEPS_SYSTEMD_DIR="$work/systemd"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
test_tools=(docker.io containerd nginx-light prometheus prometheus-node-exporter prometheus-alertmanager chromium munge slurmd
  wrk fuse3 clang-14)

FAKE_LOG="$work/build.log" "$src/scripts/install-deps.sh" build >/dev/null
export FAKE_LOG
install_line=$(grep '^install ' "$work/build.log") || fail "build: no apt-get install"
for p in "${test_tools[@]}"; do
  [[ " $install_line " != *" $p "* ]] || fail "build set asks for the test tool $p: $install_line"
done
[[ " $install_line " == *" libcpp-httplib-dev "* ]] || fail "build set lacks libcpp-httplib-dev: $install_line"
grep -qx 'policy-rc.d=101' "$work/build.log" || fail "build: apt-get ran without a policy-rc.d forbidding starts"
[[ ! -e $work/policy-rc.d ]] || fail "build: policy-rc.d left behind"

FAKE_LOG="$work/test.log" "$src/scripts/install-deps.sh" test >/dev/null
install_line=$(grep '^install ' "$work/test.log") || fail "test: no apt-get install"
for p in docker.io containerd nginx-light prometheus prometheus-alertmanager chromium munge slurmctld slurmd; do
  [[ " $install_line " == *" $p "* ]] || fail "test set lacks $p: $install_line"
done
[[ " $install_line " != *" clang-14 "* ]] || fail "test set asks for clang-14 (only asan needs it)"
grep -qx 'policy-rc.d=101' "$work/test.log" || fail "test: apt-get ran without a policy-rc.d forbidding starts"
[[ ! -e $work/policy-rc.d ]] || fail "test: policy-rc.d left behind"
# The units of what it installed are disabled again; a template unit is left alone.
grep -qx 'systemctl disable --quiet docker.service docker.socket' "$work/test.log" ||
  fail "test: docker's units not disabled: $(grep systemctl "$work/test.log" || echo none)"

# An administrator's own policy-rc.d stays as it was.
printf '#!/bin/sh\nexit 0\n' >"$work/policy-rc.d"
chmod +x "$work/policy-rc.d"
FAKE_LOG="$work/own.log" "$src/scripts/install-deps.sh" build >/dev/null
grep -qx 'policy-rc.d=0' "$work/own.log" || fail "an existing policy-rc.d was replaced"
[[ -e $work/policy-rc.d ]] || fail "an existing policy-rc.d was removed"

# The arm64 set: the cross toolchain, qemu and the :arm64 libraries through apt, after adding the
# architecture; what cannot sit beside its amd64 twin (bash, busybox, yaml-cpp's -dev) is unpacked
# under GPUD_ARM64_ROOT, never installed, and not again once there.
export GPUD_ARM64_ROOT="$work/arm64-root"
FAKE_LOG="$work/arm64.log" "$src/scripts/install-deps.sh" arm64 >/dev/null
grep -qx 'dpkg --add-architecture arm64' "$work/arm64.log" || fail "arm64: the architecture was not added"
install_line=$(grep '^install ' "$work/arm64.log") || fail "arm64: no apt-get install"
for p in crossbuild-essential-arm64 qemu-user-static libgrpc++-dev:arm64 libssl-dev:arm64 libre2-dev:arm64 \
  libcpp-httplib-dev; do
  [[ " $install_line " == *" $p "* ]] || fail "arm64 set lacks $p: $install_line"
done
for p in bash:arm64 busybox-static:arm64 libyaml-cpp-dev:arm64 docker.io; do
  [[ " $install_line " != *" $p "* ]] || fail "arm64 set installs $p: $install_line"
done
for p in bash busybox-static libyaml-cpp-dev; do
  grep -q "^download -qq $p:arm64\$" "$work/arm64.log" || fail "arm64: $p not downloaded"
  grep -q "^dpkg-deb -x .*/${p}_1.0_arm64.deb $GPUD_ARM64_ROOT\$" "$work/arm64.log" || fail "arm64: $p not unpacked"
  [[ -s $GPUD_ARM64_ROOT/.unpacked/$p ]] || fail "arm64: $p not recorded as unpacked"
done
FAKE_LOG="$work/arm64-again.log" "$src/scripts/install-deps.sh" arm64 >/dev/null
! grep -q '^download' "$work/arm64-again.log" || fail "arm64: unpacked again: $(cat "$work/arm64-again.log")"

"$src/scripts/install-deps.sh" nonsense 2>"$work/err" && fail "an unknown set was accepted"
grep -q "unknown set 'nonsense'" "$work/err" || fail "no reason for an unknown set: $(cat "$work/err")"
echo "install-deps: build, test and arm64 sets right, no service started"
