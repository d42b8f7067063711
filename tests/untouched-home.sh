#!/bin/sh
# Runs a command (`make test`'s cargo test) with HOME and every XDG base directory pointing at an
# empty directory of its own, and RALPH_STATE_DIR unset; then fails, naming what it found, if
# anything of ralph's appeared there. A test that starts ralph (or a shell, a broker, tmux)
# without its own RALPH_STATE_DIR and XDG_* directories would otherwise add its loops to the
# developer's registry (`ralph status` from anywhere, the dashboard, a paired Telegram user) or
# read their config.
#
# Usage: tests/untouched-home.sh COMMAND [ARGS...]
# Exit status: the command's when nothing leaked; 1 when something did.
set -eu

sentinel=$(mktemp -d "${TMPDIR:-/tmp}/ralph-test-home.XXXXXX")

# cargo and rustup keep their own homes: the real ones.
CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export CARGO_HOME RUSTUP_HOME

status=0
env -u RALPH_STATE_DIR -u RALPH_DIR \
  HOME="$sentinel" \
  XDG_CONFIG_HOME="$sentinel/.config" \
  XDG_STATE_HOME="$sentinel/.local/state" \
  XDG_DATA_HOME="$sentinel/.local/share" \
  XDG_CACHE_HOME="$sentinel/.cache" \
  "$@" || status=$?

leaks=$(find "$sentinel" -mindepth 1 -iname '*ralph*' -print)
if [ -n "$leaks" ]; then
  {
    echo "untouched-home: the tests wrote ralph's files into the home directory they were given"
    echo "($sentinel), which stands for the developer's own; a test is missing its own"
    echo "RALPH_STATE_DIR or XDG_* directories (tests/e2e/util.rs: user_dirs_env). Found:"
    # What is in them too (the first 40), so the test that wrote it can be told by its files.
    find "$sentinel" -mindepth 1 -iname '*ralph*' -exec find {} + | head -n 40 | sed 's/^/  /'
  } >&2
  rm -rf -- "$sentinel"
  exit 1
fi
rm -rf -- "$sentinel"
exit "$status"
