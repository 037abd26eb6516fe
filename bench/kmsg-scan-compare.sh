#!/usr/bin/env bash
# Whether two gpud binaries make the same of the same kernel logs: runs `scan --kernel-log LOG --json`
# with each and compares every event, the Xid/SXid summary, and what the kernel-log components'
# states say of their events. Left out, as they change from run to run: the machine's info, the
# host's live readings, check times, and the read time given to events whose line has no time.
#   usage: bench/kmsg-scan-compare.sh OLD_GPUD NEW_GPUD LOG...   (exit 1 on any difference)
set -euo pipefail
old=${1:?old gpud}
new=${2:?new gpud}
shift 2
work=$(mktemp -d /tmp/gpud-scan-compare-XXXXXX)
trap 'rm -rf "$work"' EXIT
normalize() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
out = {"kernel_log_summary": d.get("kernel_log_summary"), "components": {}}
for c in d["components"]:
    events = []
    for e in c.get("events", []):
        if e.get("name", "").startswith("blocked_processes"):
            continue  # the host live, not the kernel log
        e = dict(e)
        if e.get("extra_info", {}).get("time_known") is False:
            e.pop("time", None)
        events.append(e)
    states = []
    for s in c.get("states", []):
        x = s.get("extra_info", {})
        kept = {k: x[k] for k in ("devices", "kernel_log_events") if k in x}
        # Its times are compared with the events themselves (an untimed line gets the read time).
        if "kernel_log_events" in kept:
            kept["kernel_log_events"] = [{k: v for k, v in e.items() if k != "time"}
                                         for e in json.loads(kept["kernel_log_events"])]
        states.append(kept)
    out["components"][c["component"]] = {"events": events, "states": states}
json.dump(out, sys.stdout, indent=1, sort_keys=True)
'
}
status=0
for log in "$@"; do
  for tag in old new; do
    bin=$([[ $tag == old ]] && echo "$old" || echo "$new")
    "$bin" scan --kernel-log "$log" --json --log-level error >"$work/$tag.json" || true
    normalize <"$work/$tag.json" >"$work/$tag.norm"
  done
  events=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(len(c["events"]) for c in d["components"].values()))' "$work/old.norm")
  if cmp -s "$work/old.norm" "$work/new.norm"; then
    echo "same: $log ($events events)"
  else
    echo "DIFFERENT: $log"
    diff "$work/old.norm" "$work/new.norm" | head -20
    status=1
  fi
done
exit $status
