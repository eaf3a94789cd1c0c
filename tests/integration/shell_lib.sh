# shellcheck shell=bash
# Helpers for the `dljob shell` integration tests (sourced after lib.sh): drive a real terminal
# with tmux on a private socket, so the session gets a tty exactly as a user's would.
command -v tmux >/dev/null || { echo "SKIP: tmux is not installed (scripts/setup.sh installs it)"; exit 0; }
TMUX_SOCKET=dljob-shell-$$
PANE=session
export HOME=$WORK/home # a ~/.bashrc of our own: the session must source it first
mkdir -p "$HOME"
echo 'export DLJOB_TEST_BASHRC=sourced' >"$HOME/.bashrc"
# Replaces lib.sh's exit trap, so it also runs lib.sh's cleanup (cancel leftover jobs, remove WORK).
tmux_cleanup() {
  tmux -L "$TMUX_SOCKET" kill-server 2>/dev/null || true
  cleanup
}
trap tmux_cleanup EXIT
# Starts a plain bash in a detached tmux pane; the tmux server inherits this environment.
tmux_start() {
  tmux -L "$TMUX_SOCKET" new-session -d -s "$PANE" -x 200 -y 50 "bash --norc --noprofile"
  tmux -L "$TMUX_SOCKET" set-option -t "$PANE" history-limit 5000 >/dev/null
}
tmux_type() { tmux -L "$TMUX_SOCKET" send-keys -t "$PANE" "$1" Enter; }
# Forgets what the pane showed (screen and history), so wait_for sees only what comes next.
# `clear` runs when the pane's shell gets to it, on a loaded machine later than any fixed sleep;
# until then the previous session's prompt is on screen and would satisfy the next wait_for (a
# CI run cancelled the wrong session that way). So wait until only the bare prompt is left.
tmux_reset() {
  local i
  tmux_type clear
  for ((i = 0; i < 100; i++)); do
    tmux -L "$TMUX_SOCKET" clear-history -t "$PANE"
    [ "$(screen_text | grep -cv '^$')" -le 1 ] && return 0
    sleep 0.2
  done
  echo "tmux_reset: the pane did not clear; it shows:"
  screen_text | grep -v '^$' | tail -n 10
  return 1
}
screen_text() { tmux -L "$TMUX_SOCKET" capture-pane -p -J -S -2000 -t "$PANE"; }
# wait_for REGEX [SECONDS]: until the pane shows a line matching REGEX (default 60 s).
wait_for() {
  local i limit=$((${2:-60} * 5))
  for ((i = 0; i < limit; i++)); do
    screen_text | grep -Eq -- "$1" && return 0
    sleep 0.2
  done
  echo "timed out waiting for /$1/; the pane shows:"
  screen_text | grep -v '^$' | tail -n 30
  return 1
}
# The value printed on a line "KEY=value" by `probe KEY EXPR` (typed into the session).
probe() {
  tmux_type "echo \"PROBE-$1=$2\""
  wait_for "^PROBE-$1=" 20 >/dev/null || true
  screen_text | sed -n "s/^PROBE-$1=//p" | tail -n 1
}
