#!/bin/sh
# Waits, after the boot signal, until systemd has finished booting the
# node, and prints its state. One exec that waits in the node instead of
# the host asking again and again: each exec costs the engine about a
# tenth of a second of CPU, which the booting node needs.
#
# Usage: wait-systemd.sh
# Exits 0 once systemd reports running, or degraded (a unit failed, which
# diagnostics show if it matters); 1 when it reports another end state
# (maintenance, stopping). Before systemd runs as PID 1, systemctl says
# offline and the wait goes on.
while :; do
  state=$(systemctl is-system-running --wait 2>/dev/null)
  case $state in
  running | degraded)
    echo "$state"
    exit 0
    ;;
  maintenance | stopping)
    echo "systemd is $state" >&2
    exit 1
    ;;
  esac
  sleep 0.02
done
