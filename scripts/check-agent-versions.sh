#!/usr/bin/env bash
# Two modes.
#
# check-agent-versions.sh BIN_DIR
#   Fails loudly when an installed agent CLI is not the version pinned in
#   tests/agents/package.json or tests/agents/qwen/package.json (npm) or
#   tests/agents/hermes-requirements.txt (PyPI).
#
# check-agent-versions.sh --live [AGENT...]
#   Drift report (CI-optional, docs/agent-tests.md): for every agent (or the ones named,
#   by agent id), the pinned version, the newest in its registry (npm view / pip index),
#   and the result of that agent's live tests against the newest: it is installed into a
#   temporary prefix and the live tests run with it (TERMINULL_AGENTS_DIR pointing there,
#   TERMINULL_EXPECT_AGENT_VERSION set to it). When the newest is the pin, the tests run
#   against a fresh install of the pin the same way. Prints a Markdown table on stdout;
#   the tests' output goes to $TERMINULL_DRIFT_LOGS (default a temporary directory).
#   Exits 1 when any agent's tests fail against its newest release.
#   Needs npm, python3 (venv), cargo, the package registries and unshare -n (as the live
#   tests do). LIVE_FILTER (default: the agent's whole live suite) narrows the tests to
#   those whose names hold one of its words after the agent's prefix, e.g.
#   LIVE_FILTER="plain_answer tool_round_trip". LIVE_TEST_BIN: an already built live test
#   executable (target/debug/deps/live-*) to run instead of `cargo test`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
npm_pin() { node -e 'const p=require(process.argv[1]); console.log(p.dependencies[process.argv[2]])' "${2:-$root/tests/agents/package.json}" "$1"; }
pypi_pin() { sed -n "s/^$1==//p" "$root/tests/agents/hermes-requirements.txt"; }

# agent id | executable | registry package | pin | test name prefix
agents() {
    cat <<EOF
claude-code claude @anthropic-ai/claude-code $(npm_pin @anthropic-ai/claude-code) claude_code_
codex codex @openai/codex $(npm_pin @openai/codex) codex_
gemini gemini @google/gemini-cli $(npm_pin @google/gemini-cli) gemini_
opencode opencode opencode-linux-x64 $(npm_pin opencode-linux-x64) opencode_
kilo kilo @kilocode/cli-linux-x64 $(npm_pin @kilocode/cli-linux-x64) kilo_
pi pi @mariozechner/pi-coding-agent $(npm_pin @mariozechner/pi-coding-agent) pi_
droid droid @factory/cli-linux-x64 $(npm_pin @factory/cli-linux-x64) droid_
qwen qwen @qwen-code/qwen-code $(npm_pin @qwen-code/qwen-code "$root/tests/agents/qwen/package.json") qwen_
copilot copilot @github/copilot $(npm_pin @github/copilot) copilot_
hermes hermes hermes-agent $(pypi_pin hermes-agent) hermes_
EOF
}

if [ "${1:-}" != "--live" ]; then
    bin="${1:?usage: check-agent-versions.sh BIN_DIR | --live [AGENT...]}"
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
    while read -r _ exe package pin _; do check "$exe" "$package" "$pin"; done < <(agents)
    exit $status
fi

shift
wanted=" $* "
work="$(mktemp -d "${TMPDIR:-/tmp}/terminull-drift.XXXXXX")"
logs="${TERMINULL_DRIFT_LOGS:-$work/logs}"
mkdir -p "$logs"
# The adapters and the daemon the live tests start, built once.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
(cd "$root" && cargo build --quiet -p terminull-bridge --bin terminull -p terminull-acp -p terminull-claude-code \
    -p terminull-codex -p terminull-gemini -p terminull-opencode -p terminull-kilo -p terminull-pi -p terminull-droid \
    -p terminull-hermes -p terminull-qwen -p terminull-copilot -p terminull-agent-tests --bins >&2)

newest_of() { # package → newest version in its registry
    if [ "$1" = hermes-agent ]; then
        python3 -m pip index versions hermes-agent --disable-pip-version-check 2>/dev/null \
            | sed -n 's/^hermes-agent (\(.*\))$/\1/p'
    else
        npm view "$1" version 2>/dev/null
    fi
}

install_version() { # agent, executable, package, version, dir → the CLI linked as dir/bin/executable
    local agent="$1" exe="$2" package="$3" version="$4" dir="$5"
    mkdir -p "$dir/bin"
    case "$agent" in
    hermes)
        python3 -m venv "$dir/venv"
        "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "hermes-agent[acp]==$version"
        ln -sfn "$dir/venv/bin/hermes" "$dir/bin/hermes"
        ;;
    *)
        local omit=()
        [ "$agent" = qwen ] && omit=(--omit=optional)
        (cd "$dir" && echo '{"private":true}' >package.json \
            && npm install "${omit[@]}" --ignore-scripts --no-audit --no-fund --loglevel=error "$package@$version")
        case "$agent" in
        claude-code)
            (cd "$dir" && node node_modules/@anthropic-ai/claude-code/install.cjs)
            ln -sfn "$dir/node_modules/.bin/claude" "$dir/bin/claude"
            ;;
        opencode | kilo | droid) ln -sfn "$dir/node_modules/$package/bin/$exe" "$dir/bin/$exe" ;;
        *) ln -sfn "$dir/node_modules/.bin/$exe" "$dir/bin/$exe" ;;
        esac
        ;;
    esac
    "$dir/bin/$exe" --version >/dev/null 2>&1
}

status=0
echo "| agent | package | pinned | newest | live tests against the newest |"
echo "|---|---|---|---|---|"
while read -r agent exe package pin prefix; do
    if [ "$wanted" != "  " ] && [[ "$wanted" != *" $agent "* ]]; then continue; fi
    newest="$(newest_of "$package" || true)"
    if [ -z "$newest" ]; then
        echo "| $agent | $package | $pin | (registry did not answer) | not run |"
        status=1
        continue
    fi
    dir="$work/$agent"
    log="$logs/$agent-$newest.log"
    if ! install_version "$agent" "$exe" "$package" "$newest" "$dir" >"$log" 2>&1; then
        echo "| $agent | $package | $pin | $newest | install failed ($log) |"
        status=1
        continue
    fi
    filters=()
    for f in ${LIVE_FILTER:-}; do filters+=("$prefix$f"); done
    [ ${#filters[@]} -eq 0 ] && filters=("$prefix")
    set +e
    export TERMINULL_LIVE_AGENTS=1 TERMINULL_AGENTS_DIR="$dir" TERMINULL_EXPECT_AGENT_VERSION="$newest"
    if [ -n "${LIVE_TEST_BIN:-}" ]; then
        (cd "$root/tests/agents" && timeout 3600 "$LIVE_TEST_BIN" "${filters[@]}") >>"$log" 2>&1
    else
        (cd "$root" && timeout 3600 cargo test -p terminull-agent-tests --test live -- "${filters[@]}") >>"$log" 2>&1
    fi
    code=$?
    set -e
    summary="$(grep -E '^test result:' "$log" | tail -1 | sed -E 's/^test result: (ok|FAILED)\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored.*/\1: \2 passed, \3 failed, \4 ignored/')"
    failed="$(grep -E '^test .* FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | tr '\n' ' ' || true)"
    [ "$code" -ne 0 ] && status=1
    echo "| $agent | $package | $pin | $newest$([ "$newest" = "$pin" ] && echo ' (= pin)') | ${summary:-exit $code, see $log}${failed:+ — failed: $failed} |"
done < <(agents)
echo "logs: $logs" >&2
exit $status
