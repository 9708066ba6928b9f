#!/bin/sh
# Starts applying manifests that nothing waits for (the storage
# provisioner, the NetworkPolicy agent) in the background, retried while
# the API server is busy right after start, and returns at once.
#
# Usage: late-addons.sh KUBECONFIG LOG MANIFEST...
# KUBECONFIG is the admin's; LOG gets what kubectl said.
kubeconfig=$1 log=$2
shift 2
# "$@" becomes -f MANIFEST for each manifest.
n=$#
for m in "$@"; do set -- "$@" -f "$m"; done
shift "$n"
(
  for _ in $(seq 30); do
    kubectl --kubeconfig "$kubeconfig" apply "$@" && exit 0
    sleep 1
  done
  exit 1
) </dev/null >"$log" 2>&1 &
