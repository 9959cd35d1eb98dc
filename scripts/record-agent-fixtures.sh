#!/usr/bin/env bash
# Refreshes tests/fixtures/agents/<agent>/<scenario>.jsonl from live runs of the pinned
# agent CLIs (each in a private network namespace, against the scripted model server).
# Extra arguments filter the live tests by name, e.g. `codex`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-agents.sh >/dev/null
TERMINULL_LIVE_AGENTS=1 TERMINULL_UPDATE_AGENT_FIXTURES=1 \
    cargo test -p terminull-agent-tests --test live -- --test-threads=1 "$@"
git status --short tests/fixtures/agents
