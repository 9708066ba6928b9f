#!/bin/sh
# Runs the rest of kubeadm init on the first control plane (kindtest
# creates the kube-proxy and CoreDNS add-ons itself, from the host).
#
# Usage: kubeadm-init.sh CONFIG LOG [WRAPPER...]
# CONFIG is kubeadm's configuration and LOG gets kubeadm's output. WRAPPER
# is a command kubeadm runs under (tests use it to make init fail).
set -e
config=$1 log=$2
shift 2
if ! "$@" kubeadm init --config "$config" --skip-token-print --skip-certificate-key-print -v=4 >"$log" 2>&1; then
  echo "kubeadm init failed; its last lines:"
  tail -n 40 "$log"
  exit 1
fi
