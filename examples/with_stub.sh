#!/usr/bin/env bash
# Run an example workflow against the local stub API (examples/stub_server.py).
# Nothing leaves 127.0.0.1: the stub listens there on a free port, only that address is
# allowed to HTTP nodes (FLOWLOOM_HTTP_ALLOW), and the workflow gets the stub's URL as
# its `base_url` input.
#
# Usage: examples/with_stub.sh WORKFLOW.json [more `flowloom run` options, e.g. --input k=v --json]
# Env:   PYTHON (default python3) runs the stub; FLOWLOOM (default flowloom) is the CLI.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workflow="$1"
shift

log="$(mktemp)"
"${PYTHON:-python3}" "$here/stub_server.py" 0 >"$log" 2>/dev/null &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -f "$log"
}
trap cleanup EXIT

port=""
for _ in $(seq 100); do
    port="$(sed -n 's#^ready http://127\.0\.0\.1:\([0-9][0-9]*\)$#\1#p' "$log")"
    [[ -n "$port" ]] && break
    kill -0 "$server" 2>/dev/null || { echo "stub server failed to start" >&2; exit 1; }
    sleep 0.1
done
[[ -n "$port" ]] || { echo "stub server did not report ready" >&2; exit 1; }

FLOWLOOM_HTTP_ALLOW=127.0.0.1 "${FLOWLOOM:-flowloom}" run "$workflow" \
    --input "base_url=http://127.0.0.1:$port" "$@"
