#!/usr/bin/env bash
# CTest: the Alertmanager example (deploy/alertmanager/alertmanager.yml) passes `amtool
# check-config`. Exits 77 (SKIP) when amtool is missing. Its grouping and inhibition are exercised
# against real alerts by tests/e2e/fleet_e2e_test.cpp.
set -euo pipefail

config=${1:?usage: config_test.sh <alertmanager.yml>}
amtool=${AMTOOL:-/usr/bin/amtool}
if [[ ! -x $amtool ]]; then
  echo "SKIP: $amtool not found (scripts/install-deps.sh installs Debian's prometheus-alertmanager)"
  exit 77
fi
"$amtool" check-config "$config"
