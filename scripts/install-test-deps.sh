#!/usr/bin/env bash
# Installs what the test suite needs besides Rust: Python 3 and Node run the example and
# fixture adapters and npm installs the agent CLIs; unshare and ip isolate the live
# agent tests. Does nothing when they are already there.
set -euo pipefail
missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
# The live agent tests run each CLI in a private network namespace: unshare + ip.
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
echo "python3: $(python3 --version 2>&1), node: $(node --version 2>&1)"
