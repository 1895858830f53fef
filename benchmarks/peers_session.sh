#!/usr/bin/env bash
# One benchmark session: Magnetar and Redis Streams (appendfsync always, the peer
# with the same durability) through the same harness (../shared/bench/peers/peers.py),
# plus Magnetar's own produce/consume script and the gRPC floor, all in one run.
#
#   benchmarks/peers_session.sh [OUT_DIR]      (default /tmp/magnetar-bench)
#
# Needs: `make setup`, Debian's redis-server, and redis==8.1.0 hiredis==3.5.0 in .venv
# (bench only; not a project dependency):
#   apt-get install -y redis-server && .venv/bin/pip install redis==8.1.0 hiredis==3.5.0
# Every timed run holds `flock /tmp/bench.lock`, like the shared harness. Servers listen
# on 127.0.0.1 only and are stopped at the end. REPS (default 3) sets the repetitions.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-/tmp/magnetar-bench}"
REPS="${REPS:-3}"
PY="$ROOT/.venv/bin/python"
export PEERS_DIR="$OUT/peers"
RESULTS="$OUT/results.jsonl"
REDIS_PORT=16379

rm -rf "$OUT"
mkdir -p "$PEERS_DIR/pids" "$PEERS_DIR/redis"
cd "$ROOT"

cleanup() {
  [[ -n "${STANDALONE_PID:-}" ]] && kill -INT "$STANDALONE_PID" 2>/dev/null && wait "$STANDALONE_PID" 2>/dev/null
  [[ -f "$PEERS_DIR/pids/redis.pid" ]] && kill "$(cat "$PEERS_DIR/pids/redis.pid")" 2>/dev/null
  true
}
trap cleanup EXIT

redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --protected-mode yes --dir "$PEERS_DIR/redis" \
  --appendonly yes --appendfsync always --save '' --daemonize yes \
  --pidfile "$PEERS_DIR/pids/redis.pid" --logfile "$PEERS_DIR/redis/redis.log"

"$ROOT/.venv/bin/magnetar" standalone --data-dir "$OUT/data" --metastore-port 0 --raft-port 0 \
  --bookie-port 0 --broker-port 0 --metastore-metrics-port 0 --bookie-metrics-port 0 \
  --broker-metrics-port 0 >"$OUT/standalone.log" 2>&1 &
STANDALONE_PID=$!
for _ in $(seq 300); do
  [[ -f "$OUT/data/endpoints.json" ]] && break
  kill -0 "$STANDALONE_PID" 2>/dev/null || { cat "$OUT/standalone.log"; exit 1; }
  sleep 0.1
done
[[ -f "$OUT/data/endpoints.json" ]] || { echo "standalone did not start" >&2; exit 1; }
export MAGNETAR_ENDPOINTS="$OUT/data/endpoints.json"
MAGNETAR_SERVICE_URL="$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['service_url'])" "$MAGNETAR_ENDPOINTS")"
export MAGNETAR_SERVICE_URL

one() {
  flock /tmp/bench.lock "$PY" benchmarks/peers_magnetar.py one --out "$RESULTS" "$@" >/dev/null
}

for rep in $(seq "$REPS"); do
  for peer in magnetar redis; do
    extra=(--peer "$peer" --rep "$rep")
    [[ "$peer" == redis ]] && extra+=(--redis-fsync always --variant redis-fsync-always)
    one "${extra[@]}" --workload produce --mode sync --size 1024 --n 100000 --max-seconds 20
    one "${extra[@]}" --workload produce --mode pipelined --size 1024 --n 100000 --max-seconds 20
    [[ "$peer" == redis ]] && one "${extra[@]}" --workload produce --mode batch --size 1024 --n 100000 --max-seconds 20
    one "${extra[@]}" --workload latency --rate 2000 --duration 10 --size 1024
    one "${extra[@]}" --workload e2e --size 1024 --n 50000 --max-seconds 60
    one "${extra[@]}" --workload e2e --size 1024 --n 50000 --rate 2000 --duration 10 --max-seconds 60
  done
done

echo "== Magnetar's own benchmark (sync SDK)"
flock /tmp/bench.lock "$PY" benchmarks/produce_consume.py --endpoints "$MAGNETAR_ENDPOINTS" | tee "$OUT/produce_consume.jsonl"
echo "== gRPC floor"
flock /tmp/bench.lock "$PY" benchmarks/grpc_floor.py | tee "$OUT/grpc_floor.jsonl"
echo "== peers.py report"
"$PY" benchmarks/peers_magnetar.py report --summary "$RESULTS"
