#!/bin/sh
# Deletes what a test run may have left in a reused cluster: every
# namespace but the system ones, and in default every namespaced object of
# every kind the API serves and can delete, custom resources included (the
# API's own list, not a fixed one), except the few Kubernetes itself keeps
# there. Pods go at once, without their grace period, so that the next run
# does not wait for them. Events are left to expire.
#
# Usage: clean-namespaces.sh KUBECONFIG
set -eu
export KUBECONFIG="$1"
ns=$(kubectl get namespaces -o name | grep -vxE 'namespace/(default|kube-system|kube-public|kube-node-lease)' || true)
for n in $ns; do
  kubectl delete pods --all -n "${n#namespace/}" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
done
kubectl delete pods --all -n default --grace-period=0 --force >/dev/null 2>&1 || true
# shellcheck disable=SC2086 # $ns is a list of namespace/NAME words
if [ -n "$ns" ]; then kubectl delete $ns --wait=true --timeout=2m >/dev/null; fi
kinds=$(kubectl api-resources --namespaced=true --verbs=list,delete -o name |
  grep -vxE 'pods|events|events\.events\.k8s\.io|services|endpoints|endpointslices\.discovery\.k8s\.io|configmaps|serviceaccounts' |
  paste -sd, -)
if [ -n "$kinds" ]; then kubectl delete -n default "$kinds" --all --wait=true --timeout=1m >/dev/null; fi
kubectl delete -n default services,endpoints,endpointslices.discovery.k8s.io --field-selector metadata.name!=kubernetes >/dev/null
kubectl delete -n default configmaps --field-selector metadata.name!=kube-root-ca.crt >/dev/null
kubectl delete -n default serviceaccounts --field-selector metadata.name!=default >/dev/null
