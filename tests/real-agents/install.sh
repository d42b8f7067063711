#!/usr/bin/env bash
# Installs the pinned Claude Code CLI for the real-agent tests, into target/real-agents/.
#
# Idempotent: when the pinned version is already there, it only checks it and exits (about
# 0.5 s). Leaves `target/real-agents/bin/claude`, a symlink to the native binary, which the
# tests put first on PATH. Needs node and npm, and the npm registry; nothing else.
set -euo pipefail

VERSION="${CLAUDE_CODE_VERSION:-2.1.197}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="${REAL_AGENTS_DIR:-$ROOT/target/real-agents}"
BIN="$DEST/bin"

# npm installs only the optional dependency that matches this machine
# (@anthropic-ai/claude-code-linux-x64, -linux-arm64, -linux-x64-musl, ...): the native binary.
native() {
  local f
  for f in "$DEST"/node_modules/@anthropic-ai/claude-code-*/claude; do
    [ -x "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

installed_version() {
  NATIVE="$(native)" || return 1
  # `claude --version` prints "2.1.197 (Claude Code)".
  DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 HOME="$DEST/home" \
    "$NATIVE" --version 2>/dev/null | awk '{print $1}'
}

mkdir -p "$DEST" "$BIN" "$DEST/home"
if [ "$(installed_version || true)" != "$VERSION" ]; then
  command -v npm >/dev/null || { echo "install.sh: npm is needed to install Claude Code" >&2; exit 1; }
  echo "install.sh: installing @anthropic-ai/claude-code@$VERSION into $DEST"
  # A package.json of our own keeps npm from walking up into the repository.
  [ -f "$DEST/package.json" ] || echo '{"name":"ralph-real-agents","private":true}' >"$DEST/package.json"
  # --ignore-scripts: the postinstall only links the native binary, which we call directly;
  # skipping it works the same whether or not this npm runs scripts.
  (cd "$DEST" && npm install --no-audit --no-fund --no-save --ignore-scripts --loglevel=error \
    "@anthropic-ai/claude-code@$VERSION")
  got="$(installed_version || true)"
  if [ "$got" != "$VERSION" ]; then
    echo "install.sh: expected Claude Code $VERSION under $DEST/node_modules/@anthropic-ai/, found '${got:-nothing}'" >&2
    exit 1
  fi
fi
NATIVE="$(native)"
ln -sfn "$NATIVE" "$BIN/claude"
echo "install.sh: claude $VERSION at $BIN/claude"
