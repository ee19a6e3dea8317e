#!/usr/bin/env bash
# Run the A2A conformance suite (a2aproject/a2a-tck) against `ranch serve examples/tck.yaml --root tck`.
# Usage: TCK=/path/to/a2a-tck make tck   (docs/conformance.md). Everything runs on 127.0.0.1.
set -euo pipefail

TCK=${TCK:?usage: TCK=/path/to/a2a-tck make tck}
TCK=$(cd "$TCK" && pwd)
RANCH_BIN=${RANCH_BIN:-.venv/bin}
PORT=${TCK_PORT:-18311}
CATEGORY=${TCK_CATEGORY:-all}
WORK=$(mktemp -d)

if [ ! -x "$TCK/.venv/bin/python" ]; then  # the suite gets a virtualenv of its own
  python3 -m venv "$TCK/.venv"
  "$TCK/.venv/bin/pip" install -q -e "$TCK"
fi

PYTHONPATH=. "$RANCH_BIN/ranch" serve examples/tck.yaml --root tck --host 127.0.0.1 --port "$PORT" \
  --db "sqlite+aiosqlite:///$WORK/tck.db" --caller-rate off --log-level warning >"$WORK/ranch.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT

for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/ranch.log"; exit 1; }
  sleep 0.2
done

# The suite sends A2A 1.0 method names without the A2A-Version header, which A2A 1.0 servers
# read as 0.3; its auth-header hook adds the header to every request.
cd "$TCK"
A2A_AUTH_HEADERS='{"A2A-Version": "1.0"}' TCK_STREAMING_TIMEOUT="${TCK_STREAMING_TIMEOUT:-2.0}" \
  .venv/bin/python run_tck.py --sut-url "http://127.0.0.1:$PORT" --category "$CATEGORY"
