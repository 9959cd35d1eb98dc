#!/usr/bin/env bash
# Installs the agent CLIs the live adapter tests run, exactly as pinned in
# tests/agents/package.json + package-lock.json, into a cache outside the source tree,
# then checks that each installed CLI reports the pinned version.
#
# The cache is $TERMINULL_AGENTS_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/terminull/agents.
# Prints the directory to put on PATH (…/node_modules/.bin) as its last line.
# Needs npm and the package registry; nothing else goes to the network.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pins="$root/tests/agents"
dir="${TERMINULL_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/terminull/agents}"
mkdir -p "$dir"

# Reinstall only when the pins changed since the last install.
stamp="$dir/.pins.sha256"
want="$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -d "$dir/node_modules" ]; then
    echo "installing the pinned agent CLIs into $dir" >&2
    cp "$pins/package.json" "$pins/package-lock.json" "$dir/"
    # --ignore-scripts: the CLIs ship their platform binaries as optional dependencies,
    # so no install script has to run (and none gets the chance to phone home).
    (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
    # Claude Code's own postinstall only copies its platform binary over the bin/ stub
    # (no network); run that one script, nothing else.
    (cd "$dir" && node node_modules/@anthropic-ai/claude-code/install.cjs >&2)
    echo "$want" >"$stamp"
fi

bash "$root/scripts/check-agent-versions.sh" "$dir/node_modules/.bin" >&2
echo "$dir/node_modules/.bin"
