#!/bin/sh
# Writes containerd's host configuration of registries before the node
# boots, one DIR/HOST/hosts.toml per registry name, then, when the cluster
# has a registry of its own and this is a control plane, waits until the
# registry answers on the cluster's network.
#
# Usage: registry-hosts.sh DIR WAIT_NAME WAIT_URL [HOST CONFIG]...
# WAIT_NAME is the registry's name for the error message, "" for no wait;
# WAIT_URL is where it answers; each HOST CONFIG pair is a registry name
# and its hosts.toml.
set -eu
dir=$1 wait_name=$2 wait_url=$3
shift 3
while [ $# -ge 2 ]; do
  mkdir -p "$dir/$1"
  printf '%s' "$2" > "$dir/$1/hosts.toml"
  shift 2
done
if [ -n "$wait_name" ]; then
  # shellcheck disable=SC2016 # $1 is the inner shell's
  timeout 60 sh -c 'until curl -sf -o /dev/null "$1"; do sleep 0.1; done' wait "$wait_url" || { echo "registry $wait_name does not answer on the cluster network" >&2; exit 1; }
fi
