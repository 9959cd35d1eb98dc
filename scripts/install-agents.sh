#!/usr/bin/env bash
# Installs the agent CLIs the live adapter tests run, exactly as pinned, into a cache
# outside the source tree, links them all into one bin directory, and checks that each
# reports its pinned version.
#
# Pins: tests/agents/package.json + package-lock.json (npm CLIs; the Linux x64 platform
# packages directly where a wrapper's install script would fetch them),
# tests/agents/qwen/package.json (Qwen Code, apart: no lock can hold its tree) and
# tests/agents/hermes-requirements.txt (hermes, from PyPI, into a venv).
# The cache is $TERMINULL_AGENTS_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/terminull/agents.
# Prints the bin directory to put on PATH as its last line. Needs npm, python3 (venv) and
# the package registries; nothing else goes to the network.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pins="$root/tests/agents"
dir="${TERMINULL_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/terminull/agents}"
mkdir -p "$dir"

# npm: reinstall only when the pins changed since the last install.
stamp="$dir/.pins.sha256"
want="$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -d "$dir/node_modules" ]; then
    echo "installing the pinned npm agent CLIs into $dir" >&2
    cp "$pins/package.json" "$pins/package-lock.json" "$dir/"
    # --ignore-scripts: the CLIs ship their binaries in (platform) packages, so no
    # install script has to run (and none gets the chance to phone home).
    (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
    # Claude Code's own postinstall only copies its platform binary over the bin/ stub
    # (no network); run that one script, nothing else.
    (cd "$dir" && node node_modules/@anthropic-ai/claude-code/install.cjs >&2)
    echo "$want" >"$stamp"
fi

# qwen: its own npm project (tests/agents/qwen/package.json says why), without its
# optional platform packages.
qdir="$dir/qwen"
qstamp="$dir/.qwen.sha256"
qwant="$(sha256sum "$pins/qwen/package.json" | cut -d' ' -f1)"
if [ "$(cat "$qstamp" 2>/dev/null)" != "$qwant" ] || [ ! -x "$qdir/node_modules/.bin/qwen" ]; then
    echo "installing the pinned Qwen Code into $qdir" >&2
    rm -rf "$qdir"
    mkdir -p "$qdir"
    cp "$pins/qwen/package.json" "$qdir/"
    (cd "$qdir" && npm install --omit=optional --ignore-scripts --no-package-lock --no-audit --no-fund --loglevel=error >&2)
    echo "$qwant" >"$qstamp"
fi

# hermes: a venv with every package pinned, no resolution at install time.
venv="$dir/hermes-venv"
vstamp="$dir/.hermes.sha256"
vwant="$(sha256sum "$pins/hermes-requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$vstamp" 2>/dev/null)" != "$vwant" ] || [ ! -x "$venv/bin/hermes" ]; then
    echo "installing the pinned hermes-agent into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$pins/hermes-requirements.txt" >&2
    echo "$vwant" >"$vstamp"
fi

# One directory with every CLI under its usual name.
bin="$dir/bin"
mkdir -p "$bin"
link() { ln -sfn "$1" "$bin/$2"; }
for cli in claude codex gemini pi copilot; do link "$dir/node_modules/.bin/$cli" "$cli"; done
link "$dir/node_modules/opencode-linux-x64/bin/opencode" opencode
link "$dir/node_modules/@kilocode/cli-linux-x64/bin/kilo" kilo
link "$dir/node_modules/@factory/cli-linux-x64/bin/droid" droid
link "$qdir/node_modules/.bin/qwen" qwen
link "$venv/bin/hermes" hermes

bash "$root/scripts/check-agent-versions.sh" "$bin" >&2
echo "$bin"
