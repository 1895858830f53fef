# Sourced by .ci/run: the container stage's engine. `containers_up` installs
# docker.io, docker-compose and debootstrap, starts dockerd unless one
# answers already, and builds the images (deploy/build-image.sh
# --local-base: no registry is reachable); the tests under tests/integration/docker then
# run within `make test`. `containers_down` stops the engine it started and
# puts the host's iptables, ip_forward and docker0 back as they were
# (dockerd leaves a FORWARD DROP policy behind that silently drops traffic
# on every other Linux bridge). When no engine can start, it says so in one
# line and the docker tests skip.

DOCKERD_PID=""
IPTABLES_SAVED=""
IP_FORWARD_SAVED=""

containers_up() {
  local started=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  local need=()
  command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  if [ ${#need[@]} -gt 0 ]; then
    { apt-get update -q && apt-get -o DPkg::Lock::Timeout=300 install -y -q "${need[@]}"; } \
      >/tmp/magnetar-ci-apt.log 2>&1 || {
      echo "container stage: installing ${need[*]} failed (tail /tmp/magnetar-ci-apt.log); docker tests will skip"
      return 0; }
  fi
  if ! docker info >/dev/null 2>&1; then
    if command -v iptables-save >/dev/null 2>&1; then
      IPTABLES_SAVED=$(mktemp /tmp/magnetar-ci-iptables.XXXXXX)
      iptables-save >"$IPTABLES_SAVED" 2>/dev/null || IPTABLES_SAVED=""
    fi
    IP_FORWARD_SAVED=$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null || echo 0)
    local try
    for try in 1 2 3; do
      # A dockerd killed earlier may leave a pid file naming a zombie: it
      # refuses to start until that pid is gone.
      /usr/sbin/dockerd >/tmp/magnetar-ci-dockerd.log 2>&1 &
      DOCKERD_PID=$!
      local i
      for i in $(seq 1 150); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$DOCKERD_PID" 2>/dev/null || break
        sleep 0.2
      done
      docker info >/dev/null 2>&1 && break
      kill -TERM "$DOCKERD_PID" 2>/dev/null; wait "$DOCKERD_PID" 2>/dev/null || true
      DOCKERD_PID=""
      sleep 5
    done
    if [ -z "$DOCKERD_PID" ]; then
      echo "container stage: dockerd did not start ($(tail -1 /tmp/magnetar-ci-dockerd.log)); docker tests will skip"
      return 0
    fi
  fi
  if ! deploy/build-image.sh --local-base; then
    echo "container stage: deploy/build-image.sh failed; docker tests will skip"
    return 0
  fi
  echo "container stage: engine and images ready in $((SECONDS - started)) s;" \
    "$(docker image inspect -f '{{.Size}}' local/magnetar:latest | awk '{printf "image %.0f MB", $1/1e6}')"
}

containers_down() {
  [ -n "$DOCKERD_PID" ] || return 0
  # Whatever a test left behind (fixtures remove their own).
  docker ps -aq --filter label=com.docker.compose.project | xargs -r docker rm -f >/dev/null 2>&1 || true
  kill -TERM "$DOCKERD_PID" 2>/dev/null || true
  local i
  for i in $(seq 1 150); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
  wait "$DOCKERD_PID" 2>/dev/null || true
  ip link del docker0 2>/dev/null || true
  if [ -n "$IPTABLES_SAVED" ]; then
    local t
    for t in filter nat; do iptables -t $t -F 2>/dev/null; iptables -t $t -X 2>/dev/null; done
    iptables-restore <"$IPTABLES_SAVED" 2>/dev/null || iptables -P FORWARD ACCEPT
    rm -f "$IPTABLES_SAVED"
  else
    # Nothing saved to put back: only undo what breaks other bridges (the
    # FORWARD DROP policy), never flush rules this script did not make.
    iptables -P FORWARD ACCEPT 2>/dev/null || true
  fi
  echo "${IP_FORWARD_SAVED:-0}" >/proc/sys/net/ipv4/ip_forward 2>/dev/null || true
  echo "container stage: dockerd stopped, host iptables and ip_forward restored"
}
