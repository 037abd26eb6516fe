#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets of fuzz/ in the sanitizer build $FUZZ_BUILD (clang, ASan
# and UBSan, configured by `make asan-configure`; the same build `make test-asan` uses) and runs each
# for $FUZZ_SECONDS (default 60) on one core, starting from seeds made of the repository's fixtures
# and the checked-in regression inputs. A crash, a leak or undefined behaviour fails the run; the
# input that caused it is left in $FUZZ_BUILD/fuzz-crashes/<target>/ (replay it with
# `$FUZZ_BUILD/fuzz/<target> <file>`). Prints each target's executions per second and total runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD:-build-asan}
secs=${FUZZ_SECONDS:-60}
jobs=${JOBS:-$(nproc)}

if ! grep -qs '^GPUD_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "fuzz.sh: $build is not a fuzzing build; run \`make fuzz\` (it configures one)" >&2
  exit 2
fi
cmake --build "$build" -j "$jobs" --target gpud_fuzz_targets

# Seeds: kernel logs of every format (in chunks of 40 lines), the NVML scenarios, the shipped
# configuration, flag lists and query strings of the docs.
seeds=$build/fuzz-seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{kernel_log_line_fuzz,saved_log_reader_fuzz,config_file_fuzz,run_flags_fuzz,api_query_params_fuzz,fake_nvml_scenario_fuzz,plugin_specs_fuzz}
cp testing/fixtures/nvml/*.json "$seeds/fake_nvml_scenario_fuzz/"
for f in testing/fixtures/kmsg/*; do
  split -l 40 -d -a 3 "$f" "$seeds/kernel_log_line_fuzz/$(basename "$f")."
done
for f in "$seeds"/kernel_log_line_fuzz/*; do
  { printf '\x10\x40'; cat "$f"; } >"$seeds/saved_log_reader_fuzz/$(basename "$f")"
done
cp deploy/config/gpud.yaml "$seeds/config_file_fuzz/shipped.yaml"
# (fuzz/regressions/<target>/ is read as a corpus of its own below.)
cp deploy/plugins/*.yaml "$seeds/plugin_specs_fuzz/"
i=0
while IFS= read -r line; do
  # One flag list per line, arguments separated by spaces here and by NUL in the seed.
  printf '%s' "$line" | tr ' ' '\0' >"$seeds/run_flags_fuzz/$((i++))"
done <<'FLAGS'
--listen-address 127.0.0.1:15132 --data-dir /var/lib/gpud --components cpu,memory,os
--xid-thresholds {"79":{"reboot":1},"48":{"reboot":2}} --xid-lookback-period 72h
--nvlink-expected-link-states {"at_least_gpus_with_all_links_feature_enabled":8}
--gpu-count 8 --sxid-thresholds {"12028":{"reboot":3}} --nvlink-expected-link-states {}
--events-retention-period 336h --metrics-sample-interval 30s --log-level debug --tls-san gpu-7.example
--metrics-listen-address :9400 --nvml-call-timeout 10s --kernel-modules nvidia,nvidia_uvm
FLAGS
i=0
for q in 'components=cpu,os&startTime=2025-05-01T00:00:00Z&endTime=1746090000' \
  'since=1h30m&limit=2&cursor=1746090000000_2_accelerator-nvidia-error-xid' \
  'startTime=0&endTime=2262-04-11T23:47:16Z&limit=10000' 'since=500ms&components=%20cpu%2C%20os'; do
  printf '%s' "$q" >"$seeds/api_query_params_fuzz/$((i++))"
done

failed=0
for target in "$build"/fuzz/*_fuzz; do
  name=$(basename "$target")
  corpus=$build/fuzz-corpus/$name
  crashes=$build/fuzz-crashes/$name
  mkdir -p "$corpus" "$crashes"
  log=$build/fuzz-$name.log
  if "$target" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" "$seeds/$name" "fuzz/regressions/$name" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed=1
  fi
  runs=$(awk '/stat::number_of_executed_units/{print $2}' "$log")
  per_s=$(awk '/stat::average_exec_per_sec/{print $2}' "$log")
  printf '%-26s %-6s %10s runs %8s exec/s  (%s s)\n' "$name" "$status" "${runs:-?}" "${per_s:-?}" \
    "$secs"
  if [[ $status == FAILED ]]; then
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -20 || true
    echo "  log: $log"
  fi
done
# The targets' input files (config_file_fuzz, fake_nvml_scenario_fuzz).
rm -f "${TMPDIR:-/tmp}"/gpud-config-fuzz-*.yaml "${TMPDIR:-/tmp}"/gpud-fake-nvml-fuzz-*.json
exit $failed
