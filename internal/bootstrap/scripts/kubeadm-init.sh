#!/bin/sh
# Runs the rest of kubeadm init on the first control plane, and applies
# the kube-proxy and CoreDNS manifests as soon as the API server lets the
# admin in, while kubeadm is still busy with its later phases.
#
# Usage: kubeadm-init.sh PORT KUBECONFIG ADDONS ADDONS_LOG CONFIG LOG [WRAPPER...]
# PORT is the API server's, KUBECONFIG the admin's, ADDONS the add-ons'
# manifests, ADDONS_LOG what applying them said, CONFIG kubeadm's
# configuration and LOG kubeadm's output. WRAPPER is a command kubeadm
# runs under (tests use it to make init fail).
set -e
port=$1 kubeconfig=$2 addons_manifest=$3 addons_log=$4 config=$5 log=$6
shift 6

# The add-on subshell writes nowhere near the exec's output: an open
# stdout would keep the exec going after kubeadm failed. It is killed when
# kubeadm fails, and the failure reported at once with kubeadm's last
# lines.
(
  until curl -ksf --max-time 1 "https://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.1; done
  for _ in $(seq 300); do
    kubectl --kubeconfig "$kubeconfig" apply -f "$addons_manifest" >"$addons_log" 2>&1 && exit 0
    sleep 0.2
  done
  exit 1
) </dev/null >/dev/null 2>&1 &
addons=$!
if ! "$@" kubeadm init --config "$config" --skip-token-print --skip-certificate-key-print -v=4 >"$log" 2>&1; then
  kill $addons 2>/dev/null || true
  echo "kubeadm init failed; its last lines:"
  tail -n 40 "$log"
  exit 1
fi
if ! wait $addons; then
  echo "applying the kube-proxy and CoreDNS manifests failed:"; cat "$addons_log"; exit 1
fi
