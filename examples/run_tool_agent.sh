#!/usr/bin/env bash
# Run examples/tool_agent.json: a tool_call agent with an HTTP tool on the local stub API
# (examples/stub_server.py) and a graph tool. Nothing leaves 127.0.0.1 for the tools: the
# stub listens there on a free port, and only that address is allowed to HTTP tools
# (FLOWLOOM_HTTP_ALLOW). The model is the bundled `default` model: set
# FLOWLOOM_LLM_BASE_URL, FLOWLOOM_LLM_API_KEY and FLOWLOOM_LLM_MODEL for your endpoint.
#
# Usage: examples/run_tool_agent.sh ["QUESTION"] [more `flowloom run` options, e.g. --json]
# Env:   PYTHON (default python3) runs the stub; FLOWLOOM (default flowloom) is the CLI.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
question="What is the weather in Paris, in Fahrenheit?"
if [[ $# -gt 0 && "$1" != -* ]]; then
    question="$1"
    shift
fi

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

FLOWLOOM_HTTP_ALLOW=127.0.0.1 "${FLOWLOOM:-flowloom}" run "$here/tool_agent.json" \
    --input "question=$question" --input "base_url=http://127.0.0.1:$port" "$@"
