#!/usr/bin/env bash
# Compares what `gpud scan --json` reports for each GPU with nvidia-smi on a machine with a real NVIDIA
# driver; prints a table and exits 1 on a difference beyond the tolerance (2 on a usage error).
# Needs only bash, coreutils, awk and nvidia-smi (no jq, no python).
#
#   GPUD=build/gpud scripts/device-check.sh           # default GPUD=build/gpud
#   SCAN_JSON=scan.json scripts/device-check.sh       # compare a saved scan instead of running gpud
#   NVIDIA_SMI=/path/to/nvidia-smi                    # default: nvidia-smi on PATH
#   DEVICE_CHECK_ALLOW_MISSING=1                      # a value gpud does not report is not a failure
#
# Where the gpud values come from: every JSON object that has a "uuid" key, in the scan's
# machine_info and in each component's states[].extra_info.data (a JSON string, decoded here), is one
# GPU's record; keys of nested objects are joined with "." (ecc_mode.enabled_current). The first of
# these keys found for a GPU is used:
#   name         name                                      (accelerator-nvidia-info)
#   bus id       bus_id | busID                            (every NVIDIA component / machine_info)
#   temperature  current_celsius_gpu_core | temperature_c  (accelerator-nvidia-temperature)
#   power        usage_milli_watts | power_usage_mw        (accelerator-nvidia-power, mW)
#   memory       total_bytes | memory_total_bytes          (accelerator-nvidia-memory, bytes)
#   ECC mode     ecc_mode.enabled_current | ecc_mode_current (accelerator-nvidia-ecc)
#   persistence  persistence_mode_enabled                  (accelerator-nvidia-persistence-mode)
#   clocks       graphics_mhz | clock_graphics_mhz, memory_mhz | clock_memory_mhz (accelerator-nvidia-clock-speed)
# Tolerances (values move between the two reads): temperature ±5 °C, power ±15 % (at least ±5 W),
# memory ±2 %, clocks ±20 %; name, UUID, bus id, ECC and persistence mode must match exactly.
set -uo pipefail

GPUD=${GPUD:-build/gpud}
SMI=${NVIDIA_SMI:-nvidia-smi}
ALLOW_MISSING=${DEVICE_CHECK_ALLOW_MISSING:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ -n "${SCAN_JSON:-}" ]]; then
  cp "$SCAN_JSON" "$tmp/scan.json" || exit 2
else
  [[ -x "$GPUD" ]] || { echo "device-check: $GPUD is not executable (set GPUD)" >&2; exit 2; }
  # scan exits 1 when something is unhealthy: that is not this script's business.
  "$GPUD" scan --json >"$tmp/scan.json" 2>"$tmp/scan.err"
  rc=$?
  if [[ $rc -gt 1 ]] || ! grep -q '"components"' "$tmp/scan.json"; then
    echo "device-check: '$GPUD scan --json' failed (exit $rc):" >&2
    cat "$tmp/scan.err" >&2
    exit 2
  fi
fi

fields=index,name,uuid,pci.bus_id,temperature.gpu,power.draw,memory.total,ecc.mode.current,persistence_mode,clocks.gr,clocks.mem
if ! "$SMI" --query-gpu="$fields" --format=csv,noheader,nounits >"$tmp/smi.csv" 2>"$tmp/smi.err"; then
  echo "device-check: nvidia-smi failed:" >&2
  cat "$tmp/smi.err" >&2
  exit 2
fi

# One document per line: the scan itself, then every decoded extra_info.data string.
{
  tr -d '\n' <"$tmp/scan.json"
  echo
  sed -n 's/^[[:space:]]*"data": "\(.*\)",\{0,1\}[[:space:]]*$/\1/p' "$tmp/scan.json" |
    sed -e 's/\\\\/\x01/g' -e 's/\\"/"/g' -e 's/\x01/\\/g'
} >"$tmp/docs"

# A small JSON reader: prints "uuid<TAB>key<TAB>value" for every scalar of every object with a uuid.
awk '
function flush_obj(t,   n, i, parts, kv, uuid, pk) {
  n = split(pairs[t], parts, "\034"); uuid = ""
  for (i = 1; i <= n; i++) { if (parts[i] == "") continue; split(parts[i], kv, "\035")
    if (kv[1] == "uuid" || kv[1] == "gpu_uuid") uuid = kv[2] }
  if (uuid ~ /^GPU-/ || uuid ~ /^MIG-/)
    for (i = 1; i <= n; i++) { if (parts[i] == "") continue; split(parts[i], kv, "\035")
      print uuid "\t" kv[1] "\t" kv[2] }
  # a nested object (not in an array) lends its scalars to its parent as parent_key.key
  if (t > 1 && type[t-1] == "o" && key[t-1] != "")
    for (i = 1; i <= n; i++) { if (parts[i] == "") continue; split(parts[i], kv, "\035")
      pairs[t-1] = pairs[t-1] "\034" key[t-1] "." kv[1] "\035" kv[2] }
}
function add_value(v) { if (d > 0 && type[d] == "o" && key[d] != "") pairs[d] = pairs[d] "\034" key[d] "\035" v; if (d > 0 && type[d] == "o") key[d] = "" }
{
  s = $0; len = length(s); d = 0
  for (i = 1; i <= len; i++) {
    c = substr(s, i, 1)
    if (c == "{" || c == "[") { d++; type[d] = (c == "{") ? "o" : "a"; pairs[d] = ""; key[d] = ""; continue }
    if (c == "}" || c == "]") { if (type[d] == "o") flush_obj(d); d--; if (d > 0 && type[d] == "o") key[d] = ""; continue }
    if (c == "\"") {
      str = ""; i++
      while (i <= len) { c = substr(s, i, 1)
        if (c == "\\") { str = str substr(s, i + 1, 1); i += 2; continue }
        if (c == "\"") break
        str = str c; i++ }
      j = i + 1; while (substr(s, j, 1) ~ /[ \t]/) j++
      if (substr(s, j, 1) == ":" && d > 0 && type[d] == "o" && key[d] == "") { key[d] = str; i = j; continue }
      add_value(str); continue
    }
    if (c ~ /[-0-9tfn]/) {
      v = ""; while (i <= len && substr(s, i, 1) !~ /[,}\] \t]/) { v = v substr(s, i, 1); i++ }
      i--; add_value(v); continue
    }
  }
}' "$tmp/docs" >"$tmp/gpud.tsv"

awk -F'\t' -v allow_missing="$ALLOW_MISSING" '
function lower(s) { return tolower(s) }
function busnorm(b,   parts) { b = lower(b); if (split(b, parts, ":") == 3) { sub(/^0+/, "", parts[1]); b = sprintf("%04s", parts[1]) ":" parts[2] ":" parts[3]; gsub(/ /, "0", b) } return b }
function first(u, k1, k2,   key) { key = u SUBSEP k1; if (key in val) return val[key]; if (k2 != "") { key = u SUBSEP k2; if (key in val) return val[key] } return "" }
function abs(x) { return x < 0 ? -x : x }
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
function na(s) { return s == "" || s ~ /N\/A|Not Supported|^\[/ }
function onoff(s) { s = lower(s); if (s == "true" || s == "enabled") return "Enabled"; if (s == "false" || s == "disabled") return "Disabled"; return s }
function row(gpu, what, smi, gp, ok) {
  printf "%-4s %-13s %-42s %-42s %s\n", gpu, what, smi, gp, ok
  if (ok == "DIFF") fails++
  if (ok == "MISSING" && allow_missing != "1") fails++
}
# verdicts
function cmp_exact(gpu, what, smi, gp) { if (na(smi)) row(gpu, what, smi, gp, "n/a"); else if (gp == "") row(gpu, what, smi, "-", "MISSING"); else row(gpu, what, smi, gp, (smi == gp) ? "ok" : "DIFF") }
function cmp_num(gpu, what, smi, gp, abs_tol, rel_tol,   tol) {
  if (na(smi)) { row(gpu, what, smi, gp, "n/a"); return }
  if (gp == "" || gp == "null") { row(gpu, what, smi, "-", "MISSING"); return }
  tol = abs_tol; if (rel_tol * abs(smi + 0) > tol) tol = rel_tol * abs(smi + 0)
  row(gpu, what, smi, gp, (abs(gp - smi) <= tol) ? "ok" : "DIFF")
}
FNR == NR { val[$1 SUBSEP $2] = $3; if (!(($1) in seen)) { seen[$1] = 1 }; next }
{
  n = split($0, f, ","); for (i = 1; i <= n; i++) f[i] = trim(f[i])
  idx = f[1]; u = f[3]; gpus++
  if (!(u in seen)) { row(idx, "uuid", u, "-", "MISSING"); if (allow_missing == "1") fails++; next }
  row(idx, "uuid", u, u, "ok")
  cmp_exact(idx, "name", f[2], first(u, "name"))
  b = first(u, "bus_id", "busID"); cmp_exact(idx, "bus_id", busnorm(f[4]), b == "" ? "" : busnorm(b))
  cmp_num(idx, "temp_c", f[5], first(u, "current_celsius_gpu_core", "temperature_c"), 5, 0)
  p = first(u, "usage_milli_watts", "power_usage_mw"); cmp_num(idx, "power_w", f[6], (p == "" || p == "null") ? p : sprintf("%.2f", p / 1000), 5, 0.15)
  m = first(u, "total_bytes", "memory_total_bytes"); cmp_num(idx, "memory_mib", f[7], (m == "" || m == "null") ? m : sprintf("%d", m / 1048576), 1, 0.02)
  e = first(u, "ecc_mode.enabled_current", "ecc_mode_current"); cmp_exact(idx, "ecc_mode", f[8], e == "" ? "" : onoff(e))
  pm = first(u, "persistence_mode_enabled"); cmp_exact(idx, "persistence", f[9], pm == "" ? "" : onoff(pm))
  cmp_num(idx, "clock_gr_mhz", f[10], first(u, "graphics_mhz", "clock_graphics_mhz"), 0, 0.20)
  cmp_num(idx, "clock_mem_mhz", f[11], first(u, "memory_mhz", "clock_memory_mhz"), 0, 0.20)
}
BEGIN { printf "%-4s %-13s %-42s %-42s %s\n", "GPU", "FIELD", "NVIDIA-SMI", "GPUD", "VERDICT" }
END {
  if (gpus == 0) { print "device-check: nvidia-smi listed no GPU"; exit 1 }
  printf "device-check: %d GPU(s), %d difference(s)\n", gpus, fails
  exit fails > 0 ? 1 : 0
}' "$tmp/gpud.tsv" "$tmp/smi.csv"
