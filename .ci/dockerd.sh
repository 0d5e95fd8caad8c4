# shellcheck shell=bash
# Sourced by .ci/run (and usable by hand): a private Docker daemon for the end-to-end tests in
# tests/e2e. Debian's docker.io (dockerd 20.10) with no networking, every file under one temp
# directory, and a stop function that leaves nothing behind.
#
#   source .ci/dockerd.sh
#   shmguard_start_dockerd        # installs docker.io if dockerd is missing; exports DOCKER_HOST
#   trap shmguard_stop_dockerd EXIT
#
# No registry is reachable on the CI machines: the tests build their image with `docker import`
# and run every container with `--network none`, so the daemon needs no bridge and no iptables.
# vfs is the storage driver because it works on any backing filesystem (overlay2 does not on
# overlayfs or some container roots) and the test image is a few kilobytes.

SHMGUARD_DOCKERD_DIR=""
SHMGUARD_DOCKERD_PID=""

# Start dockerd in the background and wait (at most $1 seconds, default 60) until it answers.
# On success DOCKER_HOST points at its socket; on failure the log's tail is printed, whatever
# was started is stopped, and the function returns 1.
shmguard_start_dockerd() {
  local wait_s="${1:-60}" d i
  if ! command -v dockerd >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
  fi
  d="$(mktemp -d /tmp/shmguard-dockerd.XXXXXX)"
  SHMGUARD_DOCKERD_DIR="$d"
  dockerd --bridge=none --iptables=false --ip-masq=false --storage-driver=vfs \
    --data-root "$d/data" --exec-root "$d/exec" --pidfile "$d/dockerd.pid" \
    -H "unix://$d/docker.sock" >"$d/dockerd.log" 2>&1 &
  SHMGUARD_DOCKERD_PID=$!
  export DOCKER_HOST="unix://$d/docker.sock"
  for ((i = 0; i < wait_s * 2; i++)); do
    if docker version >/dev/null 2>&1; then
      echo "dockerd $SHMGUARD_DOCKERD_PID ready at $DOCKER_HOST" >&2
      return 0
    fi
    if ! kill -0 "$SHMGUARD_DOCKERD_PID" 2>/dev/null; then
      break
    fi
    sleep 0.5
  done
  echo "dockerd did not come up; the end of $d/dockerd.log:" >&2
  tail -n 20 "$d/dockerd.log" >&2 || true
  shmguard_stop_dockerd
  return 1
}

# Stop what shmguard_start_dockerd started: dockerd (which stops its containers and its own
# containerd), then any leftover process of ours (a containerd or shim whose command line
# names our directory), then unmount and remove the directory. Safe to call twice.
shmguard_stop_dockerd() {
  local d="$SHMGUARD_DOCKERD_DIR" pid i m
  [ -n "$d" ] || return 0
  pid="$SHMGUARD_DOCKERD_PID"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  # Anything else still running from our directory (containerd, shims): by pid, never by name.
  local f c
  for f in /proc/[0-9]*/cmdline; do
    pid="${f#/proc/}" pid="${pid%/cmdline}"
    if [ "$pid" = "$$" ] || [ "$pid" = "$BASHPID" ]; then continue; fi
    c="$(tr '\0' ' ' 2>/dev/null <"$f")" || continue
    if [[ "$c" == *"$d"* ]]; then
      echo "killing leftover $pid: $c" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  # Mounts under our directory (netns files, container rootfs), deepest first.
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$d" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r)
  rm -rf "$d"
  SHMGUARD_DOCKERD_DIR=""
  SHMGUARD_DOCKERD_PID=""
  unset DOCKER_HOST
}
