#!/usr/bin/env bash
# Writes a realistic generated kernel log for the scan benchmarks: ordinary lines of every saved-log
# format (raw kmsg, dmesg, syslog, ISO, bare), one Xid or SXid line in 10,000.
#   usage: bench/kmsg-gen-log.sh SIZE_MB OUT
set -euo pipefail
size_mb=${1:?size in MiB}
log=${2:?output file}
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
