#!/usr/bin/env bash
# Fails loudly when an installed agent CLI is not the version pinned in
# tests/agents/package.json. Usage: check-agent-versions.sh BIN_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:?usage: check-agent-versions.sh BIN_DIR}"
pinned() { node -e 'const p=require(process.argv[1]); console.log(p.dependencies[process.argv[2]])' "$root/tests/agents/package.json" "$1"; }
status=0
check() { # package, executable
    local want have
    want="$(pinned "$1")"
    if [ ! -x "$bin/$2" ]; then
        echo "MISSING: $2 ($1 $want) is not in $bin; run scripts/install-agents.sh" >&2
        status=1
        return
    fi
    # Every CLI prints its version first on the line of --version; compare that word.
    have="$("$bin/$2" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+[^ ]*' | head -1 || true)"
    if [ "$have" != "$want" ]; then
        echo "VERSION MISMATCH: $2 is ${have:-unknown}, tests/agents/package.json pins $1 $want" >&2
        status=1
    else
        echo "ok: $2 $have ($1)" >&2
    fi
}
check @anthropic-ai/claude-code claude
check @openai/codex codex
exit $status
