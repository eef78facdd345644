#!/usr/bin/env bash
# make demo: builds the runner into .build/bin/local and runs it in place of this shell (exec), so
# this script's exit status is the runner's own: 0 OK, 1 an invariant broke or the run failed,
# 2 bad usage, 3 timeout, 4 a tenant halted. Extra arguments go to the runner:
#   scripts/demo.sh --timeout 20m
# LOCAL_RUNNER names another runner binary to run instead (nothing is built then).
set -euo pipefail
cd "$(dirname "$0")/.."

runner=${LOCAL_RUNNER:-}
if [ -z "$runner" ]; then
  runner=.build/bin/local
  if [ ! -x "$runner" ]; then
    # Measured in docs/development.md ("First run"); a rebuild takes seconds.
    echo "demo: building the local runner, .build/bin/local (first run only: about 10 minutes on 2 cores, the AWS SDK clients it drives the emulators with) ..."
  fi
  go build -o "$runner" ./cmd/local
fi
exec "$runner" --report .build/local/report.json "$@"
