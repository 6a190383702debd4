#!/usr/bin/env bash
# `make demo`: a local broker, a worker and a publisher on the shipped Table 1 example; the findings are
# shown as they arrive, then everything is stopped. Needs a JDK 17+ and Maven (the broker's jars).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PORT=${DEMO_PORT:-19092}
TOPOLOGY=topologies/dou-patients.yaml
work=$(mktemp -d)
worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null || true
  "$BIN/streamdetect" broker stop --port "$PORT" || true
  rm -rf "$work"
}
trap cleanup EXIT

bootstrap=$("$BIN/streamdetect" broker start --port "$PORT")
export STREAMDETECT_BOOTSTRAP_SERVERS=$bootstrap
echo "demo: broker at $bootstrap; starting a worker on $TOPOLOGY"
"$BIN/streamdetect" worker "$TOPOLOGY" --datadir "$work/worker" --loglevel warn > "$work/worker.log" 2>&1 &
worker_pid=$!
echo "demo: publishing Table 1 row by row (Dan's Flu is disclosed once the second view's Dan row arrives)"
"$BIN/streamdetect" publish "$TOPOLOGY" --batch-rows 1 --rate 2
for _ in $(seq 1 60); do
  status=0
  "$BIN/streamdetect" findings "$TOPOLOGY" --json > "$work/findings.json" 2>/dev/null || status=$?
  if [ "$status" -eq 1 ] && grep -q '"value": "Dan"' "$work/findings.json"; then
    echo "demo: the findings the worker reported:"
    "$BIN/streamdetect" findings "$TOPOLOGY" || true
    exit 0
  fi
  sleep 2
done
echo "demo: no finding arrived within 2 minutes; the worker's log:" >&2
cat "$work/worker.log" >&2
exit 1
