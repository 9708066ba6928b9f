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
    grep -qw "$c" /sys/fs/cgroup/cgroup.subtree_control || { echo "cgroup controller $c is not available to the node (the host delegates: $(cat /sys/fs/cgroup/cgroup.controllers))" >&2; exit 1; }
  done
else
  # cgroup v1: the node's cgroups are named /docker/<id>... in
  # /proc/self/cgroup but mounted at the root; bind each mount at that path
  # too so the kubelet finds the cgroups it is told it is in. The list is
  # read first: the binds themselves would show up in it.
  mounts=$(cat /proc/self/mountinfo)
  echo "$mounts" | while read -r _ _ _ root mnt _ _ _ fstype _; do
    [ "$fstype" = cgroup ] || continue
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

# Every node needs its own machine id; a restarted node keeps its own.
if [ -n "${1:-}" ]; then
  echo "$1" > /etc/machine-id
else
  tr -d - < /proc/sys/kernel/random/uuid > /etc/machine-id
fi
