#!/bin/sh
# Prepares a node before systemd starts, the steps in the order they must
# run. Usage: provision.sh [MACHINE_ID]: a restarted node passes the
# machine id it had; a new node gets a random one.
set -eu
# In a user namespace (a rootless engine) uid 0 is not the host's root.
userns=
if ! grep -Eq '^ +0 +0 +4294967295$' /proc/self/uid_map; then userns=1; fi
# systemd and the kubelet take a writable /sys for a host they may manage.
# In a user namespace the remount is refused (the sysfs mount's flags are
# locked), and /sys is not the host's to manage anyway: its files belong
# to the host's root.
if ! mount -o remount,ro /sys; then
  [ -n "$userns" ] || exit 1
  echo "provision: in a user namespace: /sys stays as the engine mounted it" >&2
fi

if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  # cgroup v2, in a cgroup namespace of the node's own: its cgroup is the
  # root here. A cgroup with processes cannot hand controllers down, so
  # move every process (the entrypoint, this shell) into init.scope, where
  # systemd expects to find itself, then enable every controller for the
  # children: the kubelet and containerd (systemd driver) need them all.
  if [ "$(cat /proc/self/cgroup)" != "0::/" ]; then
    echo "the node is not in a cgroup namespace of its own (/proc/self/cgroup: $(cat /proc/self/cgroup)); the engine must support --cgroupns=private" >&2
    exit 1
  fi
  mkdir -p /sys/fs/cgroup/init.scope
  # The list is read first: moving a process changes it.
  procs=$(cat /sys/fs/cgroup/cgroup.procs)
  for p in $procs; do
    # A process may exit in between.
    echo "$p" > /sys/fs/cgroup/init.scope/cgroup.procs 2>/dev/null || true
  done
  sed -e 's/^/+/' -e 's/ / +/g' /sys/fs/cgroup/cgroup.controllers > /sys/fs/cgroup/cgroup.subtree_control
  for c in cpu memory pids; do
    if ! grep -qw "$c" /sys/fs/cgroup/cgroup.subtree_control; then
      echo "cgroup controller $c is not available to the node (the host delegates: $(cat /sys/fs/cgroup/cgroup.controllers))" >&2
      # A rootless engine gets what systemd delegates to its user; podman's
      # API cannot tell kindtest that before a node exists.
      [ -z "$userns" ] || echo "the engine runs rootless: delegate cpu, memory and pids to its user's systemd (Delegate=cpu cpuset io memory pids in /etc/systemd/system/user@.service.d/delegate.conf, systemctl daemon-reload), then restart the user's manager and engine" >&2
      exit 1
    fi
  done
else
  # cgroup v1: the node's cgroups are named /docker/<id>... in
  # /proc/self/cgroup but mounted at the root; bind each mount at that path
  # too so the kubelet finds the cgroups it is told it is in. The list
  # (root, mount point, super options of each hierarchy) is read first:
  # the binds themselves would show up in it.
  mounts=$(awk '{ for (i = 7; $i != "-"; i++) ; if ($(i+1) == "cgroup") print $4, $5, $(i+3) }' /proc/self/mountinfo)
  echo "$mounts" | while read -r root mnt opts; do
    # The node's own cgroup in this hierarchy: the /proc/self/cgroup line
    # of a controller (or name=) among the mount's options.
    own=$(awk -F: -v opts=",$opts," '{ n = split($2, c, ","); for (i = 1; i <= n; i++) if (index(opts, "," c[i] ",")) { print $3; exit } }' /proc/self/cgroup)
    case "$own" in
      "${root%/}"/?*)
        # An ancestor of the node's cgroup is mounted (crun, podman's
        # runtime, mounts the engine's): mount the node's own cgroup
        # there instead, as runc does, or the kubelets of all nodes
        # would share one cgroup root and remove each other's pods. The
        # ancestor's mount goes: the node's runc takes the first mount of
        # a hierarchy it finds for its containers' cgroups.
        tmp=$(mktemp -d)
        mount --bind "$mnt${own#"${root%/}"}" "$tmp"
        umount "$mnt"
        mount --move "$tmp" "$mnt"
        rmdir "$tmp"
        root=$own
        ;;
    esac
    [ "$root" = / ] && continue
    mkdir -p "$mnt$root"
    mountpoint -q "$mnt$root" || mount --bind "$mnt" "$mnt$root"
  done
  # containerd, and so the kubelet (which takes its driver from the CRI),
  # use the cgroupfs driver here, not systemd's: with systemd's, the
  # kubelet had systemd make its QoS and pod slices, then made each pod's
  # directory in every hierarchy itself, while systemd was still making
  # and trimming the devices hierarchy's. About one create in fifteen, a
  # static pod failed ("mkdir .../devices/kubepods.slice/
  # kubepods-burstable.slice/...: no such file or directory") and waited
  # out the pod worker's 10 s retry, even with those slices made here.
  sed -i 's/^\( *SystemdCgroup = \)true$/\1false/' /etc/containerd/config.toml
  grep -q '^ *SystemdCgroup = false$' /etc/containerd/config.toml || { echo "containerd's config.toml has no SystemdCgroup = true to turn off" >&2; exit 1; }
fi

# Mounts made by containers (volumes of pods) must propagate.
mount --make-rshared /

# The kubelet lowers its own OOM score (kubeadm's default -999), which
# needs CAP_SYS_RESOURCE in the host's user namespace. Where the node
# lacks it (a rootless engine, a runtime that drops it) the kubelet tried
# twice, 100 ms apart, before going on: say which score it keeps (the
# node's, which systemd passes on), and the host configures that one.
capbnd=$(awk '$1 == "CapBnd:" { print $2 }' /proc/self/status)
if [ -n "$userns" ] || [ $((0x$capbnd >> 24 & 1)) = 0 ]; then
  echo "kindtest: kubelet oom-score-adj $(cat /proc/1/oom_score_adj)"
fi

# Every node needs its own machine id; a restarted node keeps its own.
if [ -n "${1:-}" ]; then
  echo "$1" > /etc/machine-id
else
  tr -d - < /proc/sys/kernel/random/uuid > /etc/machine-id
fi
