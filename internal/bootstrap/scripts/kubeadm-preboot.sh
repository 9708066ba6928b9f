#!/bin/sh
# Runs the kubeadm init phases that only write files, on the first control
# plane before systemd boots.
#
# Usage: kubeadm-preboot.sh CONFIG LOG PHASE...
# CONFIG is kubeadm's configuration, LOG where the output and errors go
# (kept in the node for log export), each PHASE a phase and its subphase,
# as in "certs all".
set -e
config=$1
exec >"$2" 2>&1
shift 2
for phase in "$@"; do
  # shellcheck disable=SC2086 # a phase is words: kubeadm init phase certs all
  kubeadm init phase $phase --config "$config"
done
