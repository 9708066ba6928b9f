#!/bin/sh
# Imports the image archive on stdin into the node's containerd, only the
# node's platform, then labels each image whose ID is known, so that the
# next load can tell the node has it.
#
# Usage: import-images.sh PLATFORM [REF LABEL]...
# PLATFORM is the node's (linux/amd64); each REF LABEL pair is an image's
# containerd name and its label, key=value.
set -e
ctr --namespace k8s.io images import --digests --platform "$1" -
shift
while [ $# -ge 2 ]; do
  ctr --namespace k8s.io images label "$1" "$2" >/dev/null || echo 'kindtest: not labelled, the next load imports it again' >&2
  shift 2
done
