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
// (prepare: load the images and give them the names TAGS lists as
// "from=to" words, the host's name removed; test: run
// the suite), and for tests IMAGE (the node image), REAPER_IMAGE,
// SUITE_ECHO_IMAGE, RUN_PRIVATE, RUN_HOST (test patterns; empty skips
// that run), ROOTLESS (a comma-separated list of docker and podman: also
// set up each rootless engine for a user and run RUN_ROOTLESS there,
// after checking that an undelegated engine is refused, then the
// kindtest package's TestKilledProcessLeavesNothing from kindtest.test),
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
    for n in $(env "$@" docker ps --filter label=dev.kindtest.cluster --format '{{.Names}}'); do
      say "progress at ${SECONDS}s: $n: $(env "$@" docker exec "$n" sh -c 'ctr -n k8s.io tasks ls 2>/dev/null | grep -c RUNNING; true' 2>/dev/null) running containers"
    done
  done
}

# run_suite NAME PATTERN [ENV...] runs the suite's tests matching PATTERN,
# as root, or as the rootless user when ENV holds its DOCKER_HOST.
run_suite() {
  local name=$1 pattern=$2
  shift 2
  run_tests "$name" v2suite.test "$pattern" "$@"
}

# run_tests NAME BINARY PATTERN [ENV...] runs the tests of the test binary
# BINARY, in the share, that match PATTERN, as run_suite does.
run_tests() {
  local name=$1 binary=$2 pattern=$3 began rc watcher
  shift 3
  local as=(env)
  case " $* " in *" DOCKER_HOST="*) as=(as_user) ;; esac
  began=$(date +%s)
  say "tests ($name): $binary -test.run '$pattern'"
  mkdir -p "$share/artifacts-$name"
  chmod 777 "$share/artifacts-$name"
  progress "$@" &
  watcher=$!
  (cd /tmp && "${as[@]}" CI=true KINDTEST_IMAGE="$IMAGE" ARTIFACTS="$share/artifacts-$name" KINDTEST_V2_CREATE_TIMEOUT="$CREATE_TIMEOUT" "$@" \
    "$share/$binary" -test.v -test.count=1 -test.timeout="$TEST_TIMEOUT" -test.run "$pattern") 2>&1 |
    tee "$share/test-$name.log"
  rc=${PIPESTATUS[0]}
  kill "$watcher" 2>/dev/null
  echo "$rc" >"$share/test-$name.rc"
  timing "suite-$name" $(($(date +%s) - began))
  say "tests ($name) exit code $rc"
}

# engine_facts NAME [ENV...] records docker info and its cgroup lines.
engine_facts() {
  local name=$1
  shift
  env "$@" docker info >"$share/docker-info-$name.txt" 2>&1
  grep -iE 'server version|cgroup|kernel version|operating system|rootless|storage driver|WARNING' "$share/docker-info-$name.txt" |
    tee "$share/docker-cgroup-$name.txt"
}

# leftovers FILE [ENV...] lists whatever the engine still holds: after the
# suite, nothing but Docker's own networks should be there. A reaper, once
# its test process is gone, takes a moment to finish.
leftovers() {
  local file=$1
  shift
  for _ in $(seq 1 120); do
    [ -z "$(env "$@" docker ps -aq)" ] && break
    sleep 1
  done
  {
    env "$@" docker ps -a --format 'container {{.Names}} {{.Image}} {{.Status}}'
    env "$@" docker volume ls --format 'volume {{.Name}}'
    env "$@" docker network ls --format 'network {{.Name}}' | grep -vE '^network (bridge|host|none)$'
  } >"$share/$file"
  say "left in the engine: $(wc -l <"$share/$file") object(s)"
  cat "$share/$file"
}

RL_USER=kt
RL_UID=1000
RL_CGROUP=/sys/fs/cgroup/user.slice/user-$RL_UID.slice/user@$RL_UID.service

# as_user runs a command as the rootless user, with its session's
# runtime directory and bus, as a login would give them.
as_user() {
  runuser -u "$RL_USER" -- env HOME="/home/$RL_USER" XDG_RUNTIME_DIR="/run/user/$RL_UID" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$RL_UID/bus" "$@"
}

# delegate CONTROLLERS sets what systemd delegates to every user's manager
# and restarts the rootless user's manager, and with it its engines. The
# empty Delegate= first: a list adds to user@.service's own (systemd 252:
# cpu memory pids), and the undelegated case must take cpu away.
delegate() {
  mkdir -p /etc/systemd/system/user@.service.d
  printf '[Service]\nDelegate=\nDelegate=%s\n' "$1" >/etc/systemd/system/user@.service.d/delegate.conf
  systemctl daemon-reload
  systemctl restart "user@$RL_UID.service"
  say "delegated to $RL_USER: $(cat "$RL_CGROUP/cgroup.controllers")"
}

# rootless_user_setup makes the user, gives it subordinate IDs and a
# manager started at boot (linger), once for every rootless engine. The
# iptables modules are loaded beforehand, as kind's rootless page says: a
# user namespace cannot load them.
rootless_user_setup() {
  id "$RL_USER" >/dev/null 2>&1 || useradd -m -u "$RL_UID" -s /bin/bash "$RL_USER" || return 1
  grep -q "^$RL_USER:" /etc/subuid || echo "$RL_USER:100000:65536" >>/etc/subuid
  grep -q "^$RL_USER:" /etc/subgid || echo "$RL_USER:100000:65536" >>/etc/subgid
  printf '%s\n' ip_tables iptable_nat ip6_tables ip6table_nat >/etc/modules-load.d/iptables.conf
  modprobe -a ip_tables iptable_nat ip6_tables ip6table_nat
  loginctl enable-linger "$RL_USER"
  for _ in $(seq 1 60); do
    [ -e "$RL_CGROUP/cgroup.controllers" ] && [ -S "/run/user/$RL_UID/bus" ] && break
    sleep 1
  done
  say "delegated to $RL_USER at setup: $(cat "$RL_CGROUP/cgroup.controllers")"
}

# rootless_docker_setup gives the user a unit running dockerd-rootless.sh
# (as dockerd-rootless-setuptool.sh would write it), enabled before the
# user's manager first starts.
rootless_docker_setup() {
  local home=/home/$RL_USER units
  id "$RL_USER" >/dev/null 2>&1 || useradd -m -u "$RL_UID" -s /bin/bash "$RL_USER" || return 1
  units=$home/.config/systemd/user
  mkdir -p "$units/default.target.wants"
  cat >"$units/docker.service" <<'UNIT'
[Unit]
Description=Docker Application Container Engine (Rootless)

[Service]
Environment=PATH=/usr/bin:/sbin:/usr/sbin:/bin
Environment=DBUS_SESSION_BUS_ADDRESS=unix:path=%t/bus
ExecStart=/usr/share/docker.io/contrib/dockerd-rootless.sh
ExecReload=/bin/kill -s HUP $MAINPID
TimeoutSec=0
RestartSec=2
Restart=always
StartLimitBurst=3
StartLimitInterval=60s
LimitNOFILE=infinity
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
Delegate=yes
Type=notify
NotifyAccess=all
KillMode=mixed

[Install]
WantedBy=default.target
UNIT
  ln -sf ../docker.service "$units/default.target.wants/docker.service"
  chown -R "$RL_USER:$RL_USER" "$home/.config"
  rootless_user_setup
}

# wait_rootless NAME [ENV...] waits for the user's engine NAME, then
# prints its log when it does not answer.
wait_rootless() {
  local name=$1
  shift
  for _ in $(seq 1 300); do
    if env "$@" docker info >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  say "rootless $name did not answer within 5 minutes"
  journalctl --no-pager -n 60 _UID="$RL_UID" || true
  return 1
}

# rootless_podman_setup names netavark as podman's network backend (for
# every user: bookworm's podman 4.3 picks CNI wherever containers-common
# installed a CNI configuration, and the guest has no CNI plugins), makes
# the user, gives the user's podman the overlay storage driver (left to
# itself, bookworm's podman 4.3 picks vfs, which copies the whole node
# image for each node) and enables podman's Docker-compatible socket in
# its manager; the socket starts the service on the first request.
rootless_podman_setup() {
  mkdir -p /etc/containers/containers.conf.d
  printf '[network]\nnetwork_backend = "netavark"\n' >/etc/containers/containers.conf.d/50-kindtest.conf
  rootless_user_setup || return 1
  as_user mkdir -p "/home/$RL_USER/.config/containers" || return 1
  printf '[storage]\ndriver = "overlay"\n' | as_user tee "/home/$RL_USER/.config/containers/storage.conf" >/dev/null || return 1
  as_user systemctl --user enable --now podman.socket || return 1
}

# engine_controllers ENGINE prints what the user's engine service was
# given. podman's, socket-activated, exits 5 s after its last request,
# and then has no cgroup to read.
engine_controllers() {
  cat "$RL_CGROUP/app.slice/$1.service/cgroup.controllers" 2>&1
}

# rootless ENGINE runs a rootless engine's phases (ENGINE: docker or
# podman, reached through its Docker-compatible socket): a user whose
# manager is given only memory and pids must be refused up front; with
# every controller delegated, RUN_ROOTLESS runs on the user's engine, and
# then a test process killed with SIGKILL while it creates a cluster must
# leave nothing there within 30 s. The engine is stopped afterwards,
# leaving the guest's CPUs to the next one.
rootless() {
  local engine=$1 began sock units rl
  case $engine in
  docker) sock=docker.sock units=(docker.service) ;;
  podman) sock=podman/podman.sock units=(podman.socket podman.service) ;;
  esac
  rl=(DOCKER_HOST="unix:///run/user/$RL_UID/$sock" KINDTEST_V2_ROOTLESS=1)
  began=$(date +%s)
  say "rootless $engine: setting up user $RL_USER"
  "rootless_${engine}_setup" || return 1
  delegate "memory pids"
  wait_rootless "$engine" "${rl[@]}" || return 1
  say "rootless $engine's controllers: $(engine_controllers "$engine")"
  timing "$engine-setup" $(($(date +%s) - began))
  began=$(date +%s)
  docker save "$IMAGE" "$REAPER_IMAGE" "$SUITE_ECHO_IMAGE" | env "${rl[@]}" docker load || return 1
  timing "$engine-load" $(($(date +%s) - began))
  engine_facts "$engine-undelegated" "${rl[@]}"
  run_suite "$engine-undelegated" 'TestRootlessWithoutDelegation' "${rl[@]}" KINDTEST_V2_UNDELEGATED=1
  began=$(date +%s)
  delegate "cpu cpuset io memory pids"
  wait_rootless "$engine" "${rl[@]}" || return 1
  say "rootless $engine's controllers: $(engine_controllers "$engine")"
  timing "$engine-redelegate" $(($(date +%s) - began))
  engine_facts "$engine" "${rl[@]}"
  run_suite "$engine" "$RUN_ROOTLESS" "${rl[@]}"
  engine_facts "$engine-killed" "${rl[@]}"
  run_tests "$engine-killed" kindtest.test '^TestKilledProcessLeavesNothing$' "${rl[@]}"
  leftovers "leftovers-$engine.txt" "${rl[@]}"
  as_user systemctl --user disable --now "${units[@]}"
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
  for pair in $TAGS; do
    if [ "${pair%%=*}" != "${pair#*=}" ]; then
      docker tag "${pair%%=*}" "${pair#*=}" || exit 1
      docker rmi "${pair%%=*}" >/dev/null || exit 1
    fi
  done
  timing docker-load $(($(date +%s) - began))
  docker images
  sync
  touch "$share/prepared.ok"
  ;;
test)
  uname -r >"$share/kernel.txt"
  engine_facts private
  if [ -n "$RUN_PRIVATE" ]; then
    run_suite private "$RUN_PRIVATE"
  fi
  if [ -n "$RUN_HOST" ]; then
    say "restarting dockerd with default-cgroupns-mode host"
    echo '{"default-cgroupns-mode": "host"}' >/etc/docker/daemon.json
    systemctl restart docker
    wait_docker || exit 1
    engine_facts host
    run_suite host "$RUN_HOST"
  fi
  leftovers leftovers.txt
  case ",$ROOTLESS," in *,docker,*) rootless docker ;; esac
  case ",$ROOTLESS," in *,podman,*) rootless podman ;; esac
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
