#!/usr/bin/env bash
# Installs what the test suite needs besides Rust (tmux drives `terminull chat` in a terminal): Python 3 and Node run the example and
# fixture adapters and npm installs the agent CLIs; unshare and ip isolate the live
# agent tests; Debian's Chromium and the web app's pinned npm packages (Playwright's
# driver, esbuild, the crypto libraries) run the phone app's browser tests. Does nothing
# when they are already there.
set -euo pipefail
missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
# The live agent tests run each CLI in a private network namespace: unshare + ip.
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# `terminull chat` in a real terminal (bridge/tests/chat_tmux.rs): tmux.
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
# The phone app's browser tests: Debian's Chromium (never a browser a test tool downloads).
[ -x /usr/bin/chromium ] || missing+=(chromium)
# The relay's multi-node tests (relay/tests/support/servers.rs) start their own Postgres
# (initdb, pg_ctl, postgres: Debian's postgresql puts them under /usr/lib/postgresql/*/bin)
# and NATS server on loopback.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    missing+=(postgresql)
fi
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
# cargo-deb builds the .deb of docs/install.md; bridge/tests/install.rs builds and installs
# it. Pinned; built from crates.io once (a few minutes), then found on PATH.
CARGO_DEB_VERSION=3.8.0
if [ "$(cargo deb --version 2>/dev/null | awk '{print $2}')" != "$CARGO_DEB_VERSION" ]; then
    echo "installing cargo-deb $CARGO_DEB_VERSION from crates.io"
    cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION"
fi
# The web app's packages, exactly as locked; reinstalled only when the lock changed.
web="$(cd "$(dirname "$0")/.." && pwd)/web"
stamp="$web/node_modules/.lock.sha256"
want="$(sha256sum "$web/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "installing the web app's npm packages (web/package-lock.json)"
    (cd "$web" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    echo "$want" >"$stamp"
fi
echo "python3: $(python3 --version 2>&1), node: $(node --version 2>&1), $(cargo deb --version 2>&1), chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1), postgres: $( (command -v postgres || ls /usr/lib/postgresql/*/bin/postgres) 2>/dev/null | head -1), nats-server: $(nats-server --version 2>/dev/null)"
