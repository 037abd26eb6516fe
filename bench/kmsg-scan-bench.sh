#!/usr/bin/env bash
# `gpud scan --kernel-log` throughput on a generated realistic kernel log (mixed formats, one
# matching line in 10,000) against `grep -c -E 'NVRM: Xid|SXid'` on the same file.
#   usage: bench/kmsg-scan-bench.sh [build-dir]   (SIZE_MB=1024 by default)
set -euo pipefail
build=${1:-build}
gpud=$build/gpud
size_mb=${SIZE_MB:-1024}
[[ -x $gpud ]] || { echo "bench: $gpud missing; run make first" >&2; exit 2; }
log=$(mktemp /tmp/gpud-kmsg-bench-XXXXXX.log)
trap 'rm -f "$log"' EXIT

# Ordinary lines of every supported format; every 10,000th line is an Xid or SXid.
awk -v target=$((size_mb * 1024 * 1024)) 'BEGIN {
  n = split("EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Opts: (null)|" \
            "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready|" \
            "systemd[1]: Started Session 42 of user root.|" \
            "audit: type=1400 audit(1700000000.123:456): apparmor=\"STATUS\" operation=\"profile_load\" name=\"snap\"|" \
            "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  535.161.08|" \
            "mlx5_core 0000:5e:00.0: mlx5_pcie_event:299:(pid 1234): PCIe slot advertised sufficient power (75W).|" \
            "usb 1-1: new high-speed USB device number 2 using xhci_hcd|" \
            "TCP: request_sock_TCP: Possible SYN flooding on port 8080. Sending cookies.", msg, "|")
  bytes = 0; i = 0
  while (bytes < target) {
    i++
    m = msg[i % n + 1]
    if (i % 10000 == 0) {
      if (i % 20000 == 0) m = sprintf("NVRM: Xid (PCI:0000:%02x:00): 79, pid=%d, name=python3, GPU has fallen off the bus.", i % 256, i % 65536)
      else m = sprintf("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link %d LTSSM Fault Up", i % 64)
    }
    f = i % 5
    if (f == 0) line = sprintf("[%7d.%06d] %s", i / 1000, i % 1000000, m)
    else if (f == 1) line = sprintf("6,%d,%d,-;%s", i, i * 1000, m)
    else if (f == 2) line = sprintf("Jan 01 00:%02d:%02d gpu-node-01 kernel: %s", (i / 60) % 60, i % 60, m)
    else if (f == 3) line = sprintf("2024-01-01T00:%02d:%02d,123456+00:00 %s", (i / 60) % 60, i % 60, m)
    else line = m
    print line
    bytes += length(line) + 1
  }
}' >"$log"
bytes=$(stat -c %s "$log")
echo "== kernel-log scan: $(awk -v b=$bytes 'BEGIN{printf "%.0f", b/1048576}') MiB, $(wc -l <"$log") lines =="
# Warm the page cache so both read from memory.
cat "$log" >/dev/null

now() { date +%s.%N; }
t0=$(now)
"$gpud" scan --kernel-log "$log" --json --log-level error \
  --components accelerator-nvidia-error-xid,accelerator-nvidia-error-sxid,memory,cpu,disk,os,nfs,pci >/dev/null || true
t1=$(now)
matches=$(grep -c -E 'NVRM: Xid|SXid' "$log" || true)
t2=$(now)
awk -v b=$bytes -v g=$(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}') -v r=$(awk -v a=$t1 -v b=$t2 'BEGIN{print b-a}') -v m=$matches 'BEGIN {
  printf "gpud scan --kernel-log: %6.2f s  %8.1f MB/s (all matchers)\n", g, b / 1e6 / g
  printf "grep -c -E:             %6.2f s  %8.1f MB/s (%d matching lines)\n", r, b / 1e6 / r, m
  printf "gpud / grep throughput: %.2f (target >= 1)\n", r / g
}'
