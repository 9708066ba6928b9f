#!/bin/sh
# Imports the image archive on stdin into the node's containerd, only the
# node's platform, then names each image as it was asked for where the
# archive named it otherwise, and labels each image whose ID is known, so
# that the next load can tell the node has it.
#
# Usage: import-images.sh PLATFORM [FROM REF LABEL]...
# PLATFORM is the node's (linux/amd64). In each FROM REF LABEL triple, REF
# is an image's containerd name, LABEL its label (key=value), and FROM the
# name the archive gives it where that is not REF (podman saves an image
# it loaded from a `docker save` archive as localhost/x:1), else empty.
set -e
ctr --namespace k8s.io images import --digests --platform "$1" -
shift
while [ $# -ge 3 ]; do
  if [ -n "$1" ] && [ "$1" != "$2" ]; then
    ctr --namespace k8s.io images tag --force "$1" "$2" >/dev/null || {
      echo "kindtest: the archive named the image $1, and naming it $2 as asked failed" >&2
      exit 1
    }
  fi
  ctr --namespace k8s.io images label "$2" "$3" >/dev/null || echo 'kindtest: not labelled, the next load imports it again' >&2
  shift 3
done
