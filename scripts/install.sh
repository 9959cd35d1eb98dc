#!/usr/bin/env bash
# Builds and installs every binary the bridge needs onto PATH: `terminull`, the relay
# `terminull-relay`, and the built-in adapters the daemon looks for next to itself
# (bridge/src/registry.rs: BUILT_INS and ACP_HOST). docs/install.md tells why a script.
#
#   scripts/install.sh [--prefix DIR] [--from-target DIR] [--debug] [--build-only] [--list]
#
#   --prefix DIR       install into DIR/bin (default: ~/.local, so ~/.local/bin)
#   --from-target DIR  skip the build: copy the binaries already built in DIR
#                      (a cargo profile directory such as target/release or target/debug)
#   --debug            build the dev profile instead of release (faster, slower binaries)
#   --build-only       build, and install nothing (before `cargo deb --no-build`)
#   --list             print the binaries installed, one a line
#
# The binaries go side by side in one directory, as the daemon expects; the script ends
# by running the installed `terminull --version`, which lists the adapters it finds.
set -euo pipefail

# Every binary installed: (package, binary). The bridge's tests check this list against
# the registry's built-ins, so an adapter added there and forgotten here fails a test.
BINARIES=(
    "terminull-bridge terminull"
    "terminull-relay terminull-relay"
    "terminull-acp terminull-acp"
    "terminull-echo echo-rs"
    "terminull-claude-code terminull-claude-code"
    "terminull-codex terminull-codex"
    "terminull-gemini terminull-gemini"
    "terminull-hermes terminull-hermes"
    "terminull-opencode terminull-opencode"
    "terminull-kilo terminull-kilo"
    "terminull-pi terminull-pi"
    "terminull-droid terminull-droid"
    "terminull-cursor terminull-cursor"
    "terminull-qwen terminull-qwen"
    "terminull-copilot terminull-copilot"
)

prefix="${HOME:?HOME is not set: pass --prefix}/.local"
from_target=""
profile="release"
build_only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --prefix=*) prefix="${1#--prefix=}"; shift ;;
        --from-target) from_target="${2:?--from-target needs a directory}"; shift 2 ;;
        --from-target=*) from_target="${1#--from-target=}"; shift ;;
        --debug) profile="dev"; shift ;;
        --build-only) build_only=1; shift ;;
        --list) for entry in "${BINARIES[@]}"; do echo "${entry#* }"; done; exit 0 ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$from_target" ]; then
    command -v cargo >/dev/null 2>&1 || {
        echo "install.sh: cargo is not on PATH: install Rust (https://rustup.rs) first" >&2
        exit 1
    }
    packages=()
    for entry in "${BINARIES[@]}"; do packages+=(-p "${entry%% *}"); done
    echo "building ${#BINARIES[@]} binaries (profile $profile)"
    (cd "$root" && cargo build --locked --profile "$profile" "${packages[@]}")
    target="${CARGO_TARGET_DIR:-$root/target}"
    case "$profile" in dev) from_target="$target/debug" ;; *) from_target="$target/$profile" ;; esac
fi

missing=()
for entry in "${BINARIES[@]}"; do
    bin="${entry#* }"
    [ -x "$from_target/$bin" ] || missing+=("$bin (cargo build -p ${entry%% *})")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install.sh: not built in $from_target: ${missing[*]}" >&2
    exit 1
fi

if [ -n "$build_only" ]; then
    echo "built ${#BINARIES[@]} binaries in $from_target"
    exit 0
fi
bindir="$prefix/bin"
mkdir -p "$bindir"
for entry in "${BINARIES[@]}"; do
    bin="${entry#* }"
    # Copy then rename: a running daemon keeps its old binary, never a half-written one.
    install -m 0755 "$from_target/$bin" "$bindir/.$bin.new"
    mv -f "$bindir/.$bin.new" "$bindir/$bin"
done
echo "installed ${#BINARIES[@]} binaries into $bindir"
"$bindir/terminull" --version
case ":$PATH:" in
    *":$bindir:"*) ;;
    *) echo "note: $bindir is not on PATH; add it: export PATH=\"$bindir:\$PATH\" (e.g. in ~/.profile)" ;;
esac
