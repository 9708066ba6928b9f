#!/bin/sh
# Makes the test process's proxy settings the default environment of every
# systemd unit of the node (containerd and the kubelet among them), before
# systemd boots, as kind passes them on. NO_PROXY gets the node network's
# own subnet, read here, besides what kindtest passes.
#
# Usage: proxy-env.sh HTTP_PROXY HTTPS_PROXY NO_PROXY (each may be "").
set -eu
http=$1 https=$2 no=$3
subnet=$(ip -4 route show scope link dev eth0 | cut -d' ' -f1 | head -n 1)
if [ -n "$subnet" ]; then
  no="$no,$subnet"
fi
mkdir -p /etc/systemd/system.conf.d
{
  echo '[Manager]'
  printf 'DefaultEnvironment='
  [ -z "$http" ] || printf '"HTTP_PROXY=%s" "http_proxy=%s" ' "$http" "$http"
  [ -z "$https" ] || printf '"HTTPS_PROXY=%s" "https_proxy=%s" ' "$https" "$https"
  printf '"NO_PROXY=%s" "no_proxy=%s"\n' "$no" "$no"
} > /etc/systemd/system.conf.d/kindtest-proxy.conf
