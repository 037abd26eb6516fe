#!/usr/bin/env bash
# CTest: deploy/prometheus/gpud-alerts.yml passes `promtool check rules`, and its unit tests
# (gpud-alerts_test.yml) pass `promtool test rules`. Exits 77 (SKIP) when promtool is missing.
set -euo pipefail

dir=${1:?usage: alert_rules_test.sh <deploy/prometheus dir>}
promtool=${PROMTOOL:-/usr/bin/promtool}
if [[ ! -x $promtool ]]; then
  echo "SKIP: $promtool not found (scripts/install-deps.sh installs Debian's prometheus package)"
  exit 77
fi
for f in gpud-alerts.yml gpud-alerts_test.yml; do
  [[ -f $dir/$f ]] || { echo "missing $dir/$f" >&2; exit 1; }
done
cd "$dir"
"$promtool" check rules gpud-alerts.yml
"$promtool" test rules gpud-alerts_test.yml
