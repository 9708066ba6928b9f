//go:build linux

package main

// Files the tool adds to the guest's root file system. They are part of the
// base disk's cache key.
var guestFiles = map[string]string{
	"etc/fstab": `/dev/vda / ext4 rw,errors=remount-ro 0 1
share /mnt/share 9p trans=virtio,version=9p2000.L,msize=262144,cache=none,nofail 0 0
`,
	"etc/modules-load.d/9p.conf": "9p\n9pnet_virtio\n",
	"etc/hostname":               "v2guest\n",
	"etc/hosts":                  "127.0.0.1 localhost\n127.0.1.1 v2guest\n",
	// The run: once Docker is up, the script the tool put in the share,
	// then power off whatever it did. Its output goes to the console,
	// which the tool reads.
	"etc/systemd/system/kindtest-v2guest.service": `[Unit]
Description=kindtest: the run the host put in /mnt/share
After=docker.service mnt-share.mount
Wants=docker.service
RequiresMountsFor=/mnt/share

[Service]
Type=oneshot
ExecStart=/bin/bash /mnt/share/guest.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
SuccessAction=poweroff
FailureAction=poweroff

[Install]
WantedBy=multi-user.target
`,
}

// guestLinks are symbolic links to add (path: target): the unit enabled.
var guestLinks = map[string]string{
	"etc/systemd/system/multi-user.target.wants/kindtest-v2guest.service": "/etc/systemd/system/kindtest-v2guest.service",
}

// readyMarker is the console line the guest script prints once Docker
// answers: the end of the boot phase.
const readyMarker = "v2guest: docker ready"

// finishedMarker is the guest script's last line, printed once its results
// are in the share and synced to disk.
const finishedMarker = "v2guest: finished"

// guestScript runs inside the guest, from the share; share/env sets MODE
// (prepare: load the images, tag ECHO_IMAGE as SUITE_ECHO_IMAGE; test: run
// the suite), and for tests IMAGE (the node image), RUN_PRIVATE,
// RUN_HOST (test patterns; RUN_HOST empty skips the second run),
// TEST_TIMEOUT and CREATE_TIMEOUT. Results go to files in the share.
const guestScript = `#!/bin/bash
set -uo pipefail
share=/mnt/share
# shellcheck disable=SC1091
. "$share/env"

say() { echo "v2guest: $*"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# timing NAME SECONDS records one phase for the host's report.
timing() { echo "$1 $2" >>"$share/timings.txt"; say "TIMING $1 ${2}s"; }

wait_docker() {
  for _ in $(seq 1 900); do
    if docker info >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  say "docker did not answer within 15 minutes"
  return 1
}

# progress prints, every two minutes, what the nodes' containerd runs:
# under emulation a phase can take many minutes, and the console is the
# only view into the guest while it runs.
progress() {
  local n
  while sleep 120; do
    for n in $(docker ps --filter label=dev.kindtest.cluster --format '{{.Names}}'); do
      say "progress at ${SECONDS}s: $n: $(docker exec "$n" sh -c 'ctr -n k8s.io tasks ls 2>/dev/null | grep -c RUNNING; true' 2>/dev/null) running containers"
    done
  done
}

# run_suite NAME PATTERN runs the suite's tests matching PATTERN.
run_suite() {
  local name=$1 pattern=$2 began rc watcher
  began=$(date +%s)
  say "suite ($name): go test -run '$pattern'"
  mkdir -p "$share/artifacts-$name"
  progress &
  watcher=$!
  (cd /root && CI=true KINDTEST_IMAGE="$IMAGE" ARTIFACTS="$share/artifacts-$name" KINDTEST_V2_CREATE_TIMEOUT="$CREATE_TIMEOUT" \
    "$share/v2suite.test" -test.v -test.count=1 -test.timeout="$TEST_TIMEOUT" -test.run "$pattern") 2>&1 |
    tee "$share/test-$name.log"
  rc=${PIPESTATUS[0]}
  kill "$watcher" 2>/dev/null
  echo "$rc" >"$share/test-$name.rc"
  timing "suite-$name" $(($(date +%s) - began))
  say "suite ($name) exit code $rc"
}

# engine_facts NAME records docker info and its cgroup lines.
engine_facts() {
  docker info >"$share/docker-info-$1.txt" 2>&1
  grep -iE 'server version|cgroup|kernel version|operating system' "$share/docker-info-$1.txt" |
    tee "$share/docker-cgroup-$1.txt"
}

# leftovers lists whatever the engine still holds: after the suite, nothing
# but Docker's own networks should be there. A reaper, once its test
# process is gone, takes a moment to finish.
leftovers() {
  for _ in $(seq 1 120); do
    [ -z "$(docker ps -aq)" ] && break
    sleep 1
  done
  {
    docker ps -a --format 'container {{.Names}} {{.Image}} {{.Status}}'
    docker volume ls --format 'volume {{.Name}}'
    docker network ls --format 'network {{.Name}}' | grep -vE '^network (bridge|host|none)$'
  } >"$share/leftovers.txt"
  say "left in the engine: $(wc -l <"$share/leftovers.txt") object(s)"
  cat "$share/leftovers.txt"
}

wait_docker || exit 1
say "docker ready at guest uptime $(uptime_s)s"
timing boot-to-docker "$(uptime_s)"
say "kernel $(uname -r), $(stat -fc %T /sys/fs/cgroup) at /sys/fs/cgroup: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"

case "$MODE" in
prepare)
  began=$(date +%s)
  for f in "$share"/images/*.tar; do
    say "docker load -i $(basename "$f")"
    docker load -i "$f" || exit 1
  done
  docker tag "$ECHO_IMAGE" "$SUITE_ECHO_IMAGE" || exit 1
  timing docker-load $(($(date +%s) - began))
  docker images
  sync
  touch "$share/prepared.ok"
  ;;
test)
  uname -r >"$share/kernel.txt"
  engine_facts private
  run_suite private "$RUN_PRIVATE"
  if [ -n "$RUN_HOST" ]; then
    say "restarting dockerd with default-cgroupns-mode host"
    echo '{"default-cgroupns-mode": "host"}' >/etc/docker/daemon.json
    systemctl restart docker
    wait_docker || exit 1
    engine_facts host
    run_suite host "$RUN_HOST"
  fi
  leftovers
  touch "$share/tested.ok"
  ;;
*)
  say "unknown MODE '$MODE'"
  exit 1
  ;;
esac
sync
say "finished"
`
