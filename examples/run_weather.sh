#!/usr/bin/env bash
# Run examples/weather_lookup.json against the local stub API (see with_stub.sh).
#
# Usage: examples/run_weather.sh [CITY] [more `flowloom run` options, e.g. --json]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
city="Paris"
if [[ $# -gt 0 && "$1" != -* ]]; then
    city="$1"
    shift
fi
exec "$here/with_stub.sh" "$here/weather_lookup.json" --input "city=$city" "$@"
