#!/bin/bash
# `station-sandbox attach` the way a person uses it, inside tmux: typing into a new login
# shell, the window size and its changes (SIGWINCH), the detach key (Ctrl-] d) returning to the
# local shell with the terminal still running, and a reattach replaying the scrollback.
. "$(dirname "$0")/lib.sh"

if ! command -v tmux >/dev/null; then
	skip "$TEST_NAME" "tmux is needed (scripts/install-deps)"
	exit 0
fi

require_controller
new_ws WS || exit 1

TMUX_SOCK=$TMP/tmux.sock
tm() {
	tmux -S "$TMUX_SOCK" "$@"
}

pane() {
	tm capture-pane -p -J -t attach
}

pane_has() {
	pane | grep -q -- "$1"
}

# wait_pane REGEX [WHAT]
wait_pane() {
	wait_for -t 10 pane_has "$1" && return 0
	_fail "${2:-pane} never showed /$1/; it shows:"
	pane | sed 's/^/#     /'
	return 1
}

cleanup_tmux() {
	tm kill-server 2>/dev/null
}
trap 'cleanup_tmux; _cleanup' EXIT

# A plain local shell in a 120x40 window, no status line.
tm -f /dev/null new-session -d -s attach -x 120 -y 40 \
	"env -i PATH=$PATH TERM=xterm-256color PS1='local\$ ' bash --norc --noprofile"
tm set -g status off
tm set -g window-size manual
wait_for -t 5 pane_has 'local\$' || {
	not_ok "tmux starts a local shell"
	exit 1
}

T=
t_attach_new_shell() {
	tm send-keys -t attach "STATION_SOCKET=$SOCK $CLI_BIN attach $WS" Enter
	wait_pane 'attached to terminal t-' "attach" || return 1
	wait_pane 'detach with Ctrl-\] d' "the detach key is shown"
	T=$(pane | grep -o 'attached to terminal t-[a-z0-9]*' | head -n 1 | awk '{print $4}')
	assert_match '^t-' "$T" "terminal id" || return 1
	tm send-keys -t attach 'echo hi-$((1+1))' Enter
	wait_pane '^hi-2' "output of echo" || return 1
}

t_window_size() {
	tm send-keys -t attach 'stty size' Enter
	wait_pane '^40 120' "stty size of the initial window" || return 1
	tm resize-window -t attach -x 100 -y 30
	sleep 0.3
	tm send-keys -t attach 'stty size' Enter
	wait_pane '^30 100' "stty size after the window shrank (SIGWINCH)"
}

t_detach() {
	tm send-keys -t attach C-] d
	wait_pane "detached from $T" "detach message" || return 1
	wait_pane "reattach with: station-sandbox attach $WS $T" "reattach hint"
	tm send-keys -t attach 'echo local-$((2+3))' Enter
	wait_pane '^local-5' "the local shell is back" || return 1
	api -q GET "/v1/workspaces/$WS/terminals/$T"
	assert_eq running "$(j .state)" "the terminal keeps running"
}

t_reattach_scrollback() {
	tm send-keys -t attach 'clear' Enter
	tm clear-history -t attach
	wait_for -t 5 bash -c "! tmux -S '$TMUX_SOCK' capture-pane -p -t attach | grep -q '^hi-2'" ||
		_fail "the pane did not clear"
	tm send-keys -t attach "STATION_SOCKET=$SOCK $CLI_BIN attach $WS $T" Enter
	wait_pane 'attached to terminal' "reattach" || return 1
	wait_pane '^hi-2' "the scrollback replayed" || return 1
	tm send-keys -t attach 'echo again-$((3+4))' Enter
	wait_pane '^again-7' "typing after the reattach" || return 1
	tm send-keys -t attach 'exit 3' Enter
	wait_pane "terminal $T exited with code 3" "the exit is shown" || return 1
	wait_pane 'local\$ $' "back in the local shell"
	api -q GET "/v1/workspaces/$WS/terminals/$T"
	assert_eq exited "$(j .state)" "recorded state"
	assert_eq 3 "$(j .exitCode)" "recorded exit code"
}

t_terminal_ls_close() {
	local out id
	out=$(cli terminal ls "$WS")
	assert_match "$T +exited +[0-9]+x[0-9]+ +3 " "$out" "terminal ls shows the ended one"
	api -q POST "/v1/workspaces/$WS/terminals" '{"command":"sleep 1000","cols":80,"rows":24}'
	id=$(j .id)
	out=$(cli terminal close "$WS" "$id")
	assert_eq "$id closed signal 9" "$out" "terminal close"
}

run_test "attach opens a login shell and types into it" t_attach_new_shell
run_test "the window size reaches the terminal, also when it changes" t_window_size
run_test "the detach key returns to the local shell, the terminal keeps running" t_detach
run_test "a reattach replays the scrollback" t_reattach_scrollback
run_test "terminal ls and terminal close" t_terminal_ls_close
