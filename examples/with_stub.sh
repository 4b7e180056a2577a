#!/usr/bin/env bash
# Run an example workflow against the local stub API (examples/stub_server.py).
# Nothing leaves 127.0.0.1: the stub listens there (on a free port unless --port says
# which), only that address is allowed to HTTP nodes (FLOWLOOM_HTTP_ALLOW), and the
# workflow gets the stub's URL as its `base_url` input. The URL is printed on stderr.
#
# Usage: examples/with_stub.sh [--port PORT] WORKFLOW.json [more `flowloom run` options, e.g. --input k=v --json]
#        --port PORT: the stub's port on 127.0.0.1 (default 0: a free one); a port in use is an error.
# Env:   PYTHON (default python3) runs the stub; FLOWLOOM (default flowloom) is the CLI.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stub_port=0
if [[ "${1:-}" == "--port" ]]; then
    [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { echo "with_stub.sh: --port needs a number (0: a free port)" >&2; exit 2; }
    stub_port="$2"
    shift 2
fi
[[ $# -ge 1 ]] || { echo "usage: with_stub.sh [--port PORT] WORKFLOW.json [flowloom run options]" >&2; exit 2; }
workflow="$1"
shift

log="$(mktemp)"
errors="$(mktemp)"
"${PYTHON:-python3}" "$here/stub_server.py" --port "$stub_port" >"$log" 2>"$errors" &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -f "$log" "$errors"
}
trap cleanup EXIT

port=""
for _ in $(seq 100); do
    port="$(sed -n 's#^ready http://127\.0\.0\.1:\([0-9][0-9]*\)$#\1#p' "$log")"
    [[ -n "$port" ]] && break
    kill -0 "$server" 2>/dev/null || { echo "stub server failed to start: $(grep -v '^stub: ' "$errors")" >&2; exit 1; }
    sleep 0.1
done
[[ -n "$port" ]] || { echo "stub server did not report ready" >&2; exit 1; }
echo "stub API on http://127.0.0.1:$port" >&2

FLOWLOOM_HTTP_ALLOW=127.0.0.1 "${FLOWLOOM:-flowloom}" run "$workflow" \
    --input "base_url=http://127.0.0.1:$port" "$@"
