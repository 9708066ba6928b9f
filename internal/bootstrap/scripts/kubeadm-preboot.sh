#!/bin/sh
# Runs the kubeadm init phases that only write files, on the first control
# plane before systemd boots, then holds one static pod manifest back (see
# kubeadm-init.sh, which releases it).
#
# Usage: kubeadm-preboot.sh CONFIG LOG MANIFEST HELD PHASE...
# CONFIG is kubeadm's configuration, LOG where the output and errors go
# (kept in the node for log export), MANIFEST the manifest to hold back
# and HELD where it waits, each PHASE a phase and its subphase, as in
# "certs all".
set -e
config=$1 manifest=$3 held=$4
exec >"$2" 2>&1
shift 4
for phase in "$@"; do
  # shellcheck disable=SC2086 # a phase is words: kubeadm init phase certs all
  kubeadm init phase $phase --config "$config"
done
mkdir -p "$(dirname "$held")"
mv "$manifest" "$held"
