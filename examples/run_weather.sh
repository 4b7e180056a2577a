#!/usr/bin/env bash
# Run examples/weather_lookup.json against the local stub API (see with_stub.sh).
#
# Usage: examples/run_weather.sh [--port PORT] [CITY] [more `flowloom run` options, e.g. --json]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port_option=()  # --port PORT: the stub API's port (default: a free one; see with_stub.sh)
if [[ "${1:-}" == "--port" ]]; then
    port_option=(--port "${2:-}")
    shift $(( $# >= 2 ? 2 : 1 ))
fi
city="Paris"
if [[ $# -gt 0 && "$1" != -* ]]; then
    city="$1"
    shift
fi
exec "$here/with_stub.sh" ${port_option[@]+"${port_option[@]}"} "$here/weather_lookup.json" --input "city=$city" "$@"
