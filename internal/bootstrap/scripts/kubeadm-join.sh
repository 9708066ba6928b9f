#!/bin/sh
# Joins a node to the cluster in one exec: writes the files given on
# standard input (kubeadm's configuration and the discovery kubeconfig),
# then runs kubeadm join, its output kept in the node for log export.
#
# Usage: kubeadm-join.sh CONFIG LOG [PATH SIZE]...
# CONFIG is kubeadm's configuration and LOG gets kubeadm's output; each
# PATH gets the next SIZE bytes of standard input.
set -eu
config=$1 log=$2
shift 2
while [ $# -gt 0 ]; do
  mkdir -p "$(dirname "$1")"
  head -c "$2" >"$1"
  shift 2
done
if ! kubeadm join --config "$config" >"$log" 2>&1; then
  echo "kubeadm join failed; its last lines:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
