#!/bin/sh
# Runs the rest of kubeadm init on the first control plane (kindtest
# creates the kube-proxy and CoreDNS add-ons itself, from the host), and
# releases the static pod manifest kubeadm-preboot.sh held back once the
# API server is healthy.
#
# Usage: kubeadm-init.sh CONFIG LOG PORT HELD MANIFEST [WRAPPER...]
# CONFIG is kubeadm's configuration and LOG gets kubeadm's output; PORT is
# the API server's; HELD is moved to MANIFEST once the API server's
# /healthz answers (which anonymous users may read only once its RBAC
# roles are in place). WRAPPER is a command kubeadm runs under (tests use
# it to make init fail).
set -e
config=$1 log=$2 port=$3 held=$4 manifest=$5
shift 5

# The subshell writes nowhere near the exec's output: an open stdout would
# keep the exec going after kubeadm failed. It is killed when kubeadm
# fails.
(
  until curl -ksf --max-time 1 "https://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.1; done
  mv "$held" "$manifest"
) </dev/null >/dev/null 2>&1 &
release=$!
if ! "$@" kubeadm init --config "$config" --skip-token-print --skip-certificate-key-print -v=4 >"$log" 2>&1; then
  kill $release 2>/dev/null || true
  echo "kubeadm init failed; its last lines:"
  tail -n 40 "$log"
  exit 1
fi
wait $release
