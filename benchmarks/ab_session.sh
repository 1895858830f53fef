#!/usr/bin/env bash
# Before and after in one run: two checkouts of Magnetar (say the previous
# commit in a second worktree, and this one), each measured with its own code
# on a standalone of its own, taking turns (A B A B ...) so that the machine's
# drift hits both alike. Per repetition and checkout: produce_consume.py
# (one-at-a-time, pipelined, end-to-end at 2,000 msg/s) and the peers
# harness's one-at-a-time and pipelined produce rows (Magnetar as a peer).
#
#   git worktree add /tmp/before HEAD~1 && (cd /tmp/before && make setup)
#   benchmarks/ab_session.sh /tmp/before . [OUT_DIR]     (default /tmp/magnetar-ab)
#
# REPS (default 3) sets the repetitions. Each checkout needs `make setup`. The
# summary (benchmarks/ab_summary.py) gives each figure's median and min-max
# per checkout (the spread is the run-to-run noise) and the ratio of medians.
set -euo pipefail

A="$(cd "$1" && pwd)"
B="$(cd "$2" && pwd)"
OUT="${3:-/tmp/magnetar-ab}"
REPS="${REPS:-3}"
RESULTS="$OUT/results.jsonl"
rm -rf "$OUT"
mkdir -p "$OUT"
STANDALONE_PID=""

stop_standalone() {
  if [[ -n "$STANDALONE_PID" ]]; then
    kill -INT "$STANDALONE_PID" 2>/dev/null || true
    wait "$STANDALONE_PID" 2>/dev/null || true
    STANDALONE_PID=""
  fi
}
trap stop_standalone EXIT

tag() {  # tag every JSON line on stdin with the checkout and repetition
  "$B/.venv/bin/python" -c '
import json, sys
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        d = json.loads(line); d["tree"] = sys.argv[1]; d["rep"] = int(sys.argv[2])
        print(json.dumps(d), flush=True)' "$1" "$2"
}

measure() {  # measure TREE_DIR LABEL REP
  local tree="$1" label="$2" rep="$3" dir="$OUT/$2-$3"
  mkdir -p "$dir"
  (cd "$tree" && exec .venv/bin/magnetar standalone --data-dir "$dir/data" --metastore-port 0 \
    --raft-port 0 --bookie-port 0 --broker-port 0 --metastore-metrics-port 0 \
    --bookie-metrics-port 0 --broker-metrics-port 0 >"$dir/standalone.log" 2>&1) &
  STANDALONE_PID=$!
  for _ in $(seq 600); do
    [[ -f "$dir/data/endpoints.json" ]] && break
    kill -0 "$STANDALONE_PID" 2>/dev/null || { cat "$dir/standalone.log"; exit 1; }
    sleep 0.1  # polling the supervisor's ready file (a shell script has nothing to wait on)
  done
  local url
  url="$("$B/.venv/bin/python" -c "import json,sys; print(json.load(open(sys.argv[1]))['service_url'])" "$dir/data/endpoints.json")"
  (cd "$tree" && flock /tmp/bench.lock .venv/bin/python benchmarks/produce_consume.py \
    --endpoints "$dir/data/endpoints.json") | tag "$label" "$rep" >>"$RESULTS"
  for mode in sync pipelined; do
    (cd "$tree" && PEERS_DIR="$dir/peers" MAGNETAR_SERVICE_URL="$url" \
      MAGNETAR_ENDPOINTS="$dir/data/endpoints.json" flock /tmp/bench.lock \
      .venv/bin/python benchmarks/peers_magnetar.py one --peer magnetar --workload produce \
      --mode "$mode" --size 1024 --n 100000 --max-seconds 20 --rep "$rep" --out "$dir/peers.jsonl" \
      >/dev/null)
  done
  tag "$label" "$rep" <"$dir/peers.jsonl" >>"$RESULTS"
  stop_standalone
}

for rep in $(seq "$REPS"); do
  measure "$A" before "$rep"
  measure "$B" after "$rep"
done
"$B/.venv/bin/python" "$B/benchmarks/ab_summary.py" "$RESULTS"
