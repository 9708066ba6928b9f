#!/bin/sh
# Prints the node cgroup's memory usage and inactive file cache, in bytes,
# on cgroup v2 or v1.
if [ -f /sys/fs/cgroup/memory.current ]; then
  echo "$(cat /sys/fs/cgroup/memory.current) $(awk '$1=="inactive_file"{print $2}' /sys/fs/cgroup/memory.stat)"
else
  echo "$(cat /sys/fs/cgroup/memory/memory.usage_in_bytes) $(awk '$1=="total_inactive_file"{print $2}' /sys/fs/cgroup/memory/memory.stat)"
fi
