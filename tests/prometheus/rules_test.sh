#!/usr/bin/env bash
# CTest: a rule file of deploy/prometheus passes `promtool check rules`, and its unit tests pass
# `promtool test rules`. Exits 77 (SKIP) when promtool is missing.
# usage: rules_test.sh <deploy/prometheus dir> <rules.yml> <rules_test.yml>
set -euo pipefail

dir=${1:?usage: rules_test.sh <deploy/prometheus dir> <rules.yml> <rules_test.yml>}
rules=${2:?usage: rules_test.sh <deploy/prometheus dir> <rules.yml> <rules_test.yml>}
tests=${3:?usage: rules_test.sh <deploy/prometheus dir> <rules.yml> <rules_test.yml>}
promtool=${PROMTOOL:-/usr/bin/promtool}
if [[ ! -x $promtool ]]; then
  echo "SKIP: $promtool not found (scripts/install-deps.sh installs Debian's prometheus package)"
  exit 77
fi
for f in "$rules" "$tests"; do
  [[ -f $dir/$f ]] || { echo "missing $dir/$f" >&2; exit 1; }
done
cd "$dir"
"$promtool" check rules "$rules"
"$promtool" test rules "$tests"
