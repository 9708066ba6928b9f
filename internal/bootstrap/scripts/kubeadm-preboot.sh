#!/bin/sh
# Prepares the first control plane before systemd boots, in one exec:
# writes the files given on standard input (kubeadm's configuration among
# them), runs the kubeadm init phases that only write files, holds one
# static pod manifest back (see kubeadm-init.sh, which releases it), and
# prints what the host needs next: kubeadm's manifests of add-ons (made
# beside the phases) and files the phases wrote (the kubeconfigs).
#
# Usage: kubeadm-preboot.sh CONFIG ADDONCONFIG LOG MANIFEST HELD [PATH SIZE]... -- [ADDON]... -- [FILE]... -- PHASE...
# CONFIG is kubeadm's configuration, ADDONCONFIG the same without patches
# (kubeadm prints add-on manifests broken when it has patches), LOG where the phases' output and
# errors go, and what kubeadm logged while printing the add-ons (kept in
# the node for log export); MANIFEST is the manifest
# to hold back and HELD where it waits. Each PATH gets the next SIZE bytes
# of standard input; each PHASE is a phase and its subphase, as in "certs
# all". The output is, for each ADDON then each FILE (paths without
# spaces), an empty line, a line "--- kindtest:NAME" and its content.
set -eu
marker='--- kindtest:'
config=$1 addonconfig=$2 log=$3 manifest=$4 held=$5
shift 5
while [ "$1" != -- ]; do
  mkdir -p "$(dirname "$1")"
  head -c "$2" >"$1"
  shift 2
done
shift

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
addons=
while [ "$1" != -- ]; do
  (
    # Only the manifests on standard output: kubeadm logs warnings (such
    # as ipvs mode's deprecation) on standard error, kept for the log.
    kubeadm init phase addon "$1" --print-manifest --config "$addonconfig" >"$out/$1" 2>"$out/$1.err"
    echo $? >"$out/$1.rc"
  ) &
  addons="$addons $1"
  shift
done
shift
files=
while [ "$1" != -- ]; do
  files="$files $1"
  shift
done
shift

for phase in "$@"; do
  # shellcheck disable=SC2086 # a phase is words: kubeadm init phase certs all
  if ! kubeadm init phase $phase --config "$config" >>"$log" 2>&1; then
    echo "kubeadm init phase $phase failed; its last lines:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
done
mkdir -p "$(dirname "$held")"
mv "$manifest" "$held"

wait
for a in $addons; do
  if [ "$(cat "$out/$a.rc" 2>/dev/null)" != 0 ]; then
    echo "kubeadm could not print the $a add-on's manifests:" >&2
    cat "$out/$a.err" "$out/$a" >&2
    exit 1
  fi
  cat "$out/$a.err" >>"$log"
done
for a in $addons; do
  printf '\n%s%s\n' "$marker" "$a"
  cat "$out/$a"
done
for f in $files; do
  printf '\n%s%s\n' "$marker" "$f"
  cat "$f"
done
