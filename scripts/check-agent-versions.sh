#!/usr/bin/env bash
# Fails loudly when an installed agent CLI is not the version pinned in
# tests/agents/package.json or tests/agents/qwen/package.json (npm) or tests/agents/hermes-requirements.txt (PyPI).
# Usage: check-agent-versions.sh BIN_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:?usage: check-agent-versions.sh BIN_DIR}"
npm_pin() { node -e 'const p=require(process.argv[1]); console.log(p.dependencies[process.argv[2]])' "${2:-$root/tests/agents/package.json}" "$1"; }
pypi_pin() { sed -n "s/^$1==//p" "$root/tests/agents/hermes-requirements.txt"; }
status=0
check() { # executable, package, pinned version
    local have
    if [ ! -x "$bin/$1" ]; then
        echo "MISSING: $1 ($2 $3) is not in $bin; run scripts/install-agents.sh" >&2
        status=1
        return
    fi
    # Each CLI prints its version as the first x.y.z on its --version output.
    have="$("$bin/$1" --version 2>&1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1 || true)"
    if [ "$have" != "$3" ]; then
        echo "VERSION MISMATCH: $1 is ${have:-unknown}, the pin is $2 $3" >&2
        status=1
    else
        echo "ok: $1 $have ($2)" >&2
    fi
}
check claude @anthropic-ai/claude-code "$(npm_pin @anthropic-ai/claude-code)"
check codex @openai/codex "$(npm_pin @openai/codex)"
check gemini @google/gemini-cli "$(npm_pin @google/gemini-cli)"
check opencode opencode-linux-x64 "$(npm_pin opencode-linux-x64)"
check kilo @kilocode/cli-linux-x64 "$(npm_pin @kilocode/cli-linux-x64)"
check pi @mariozechner/pi-coding-agent "$(npm_pin @mariozechner/pi-coding-agent)"
check droid @factory/cli-linux-x64 "$(npm_pin @factory/cli-linux-x64)"
check qwen @qwen-code/qwen-code "$(npm_pin @qwen-code/qwen-code "$root/tests/agents/qwen/package.json")"
check copilot @github/copilot "$(npm_pin @github/copilot)"
check hermes hermes-agent "$(pypi_pin hermes-agent)"
exit $status
