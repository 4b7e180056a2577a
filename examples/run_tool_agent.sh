#!/usr/bin/env bash
# Run examples/tool_agent.json: a tool_call agent with an HTTP tool on the local stub API
# and a graph tool (see with_stub.sh: nothing leaves 127.0.0.1 for the tools). The model is
# the bundled `default` model: set FLOWLOOM_LLM_BASE_URL, FLOWLOOM_LLM_API_KEY and
# FLOWLOOM_LLM_MODEL for your endpoint.
#
# Usage: examples/run_tool_agent.sh [--port PORT] ["QUESTION"] [more `flowloom run` options, e.g. --json]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port_option=()  # --port PORT: the stub API's port (default: a free one; see with_stub.sh)
if [[ "${1:-}" == "--port" ]]; then
    port_option=(--port "${2:-}")
    shift $(( $# >= 2 ? 2 : 1 ))
fi
question="What is the weather in Paris, in Fahrenheit?"
if [[ $# -gt 0 && "$1" != -* ]]; then
    question="$1"
    shift
fi
exec "$here/with_stub.sh" ${port_option[@]+"${port_option[@]}"} "$here/tool_agent.json" --input "question=$question" "$@"
