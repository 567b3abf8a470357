#!/bin/bash
# `--listen unix:PATH` for a socket the controller serves already (<root>/station.sock however
# spelled, or the same path twice) adds nothing: binding it again would unlink the served socket
# and leave its listener running, unreachable. Each path has exactly one listening socket of the
# controller (its fds against /proc/net/unix), and the socket answers. Positive control: a
# --listen unix: on another path is a second listener that answers too.
. "$(dirname "$0")/lib.sh"

EXTRA=$TMP/extra.sock

# listeners PATH: how many listening unix sockets bound to PATH the controller holds.
listeners() {
	local inodes
	inodes=$(find "/proc/$CONTROLLER_PID/fd" -type l -printf '%l\n' 2>/dev/null |
		sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | sort -u)
	# /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 listens.
	awk -v path="$1" -v inodes=" $(echo $inodes) " \
		'NR > 1 && $4 == "00010000" && $8 == path && index(inodes, " " $7 " ") { n++ }
		 END { print n + 0 }' /proc/net/unix
}

# answers PATH: GET /v1/ready on that socket is 200.
answers() {
	[[ $(curl -sS --max-time 30 --unix-socket "$1" -o /dev/null -w '%{http_code}' \
		http://station/v1/ready 2>/dev/null) == 200 ]]
}

require_controller --listen "unix:$ROOT/station.sock" --listen "unix:$ROOT/./station.sock" \
	--listen "unix:$EXTRA" --listen "unix:$EXTRA"

t_served_once() {
	assert_eq 1 "$(listeners "$SOCK")" "listening sockets on $SOCK" || return 1
	answers "$SOCK" || _fail "$SOCK does not answer"
	assert_contains "already listening there" "$(grep "$ROOT/station.sock" "$CONTROLLER_LOG")" \
		"the log says the --listen added nothing"
}
run_test "--listen unix:<root>/station.sock is the socket already served" t_served_once

t_same_path_twice() {
	assert_eq 1 "$(listeners "$EXTRA")" "listening sockets on $EXTRA" || return 1
	answers "$EXTRA" || _fail "$EXTRA does not answer"
	# positive control: the other path is a listener of its own, beside station.sock
	answers "$SOCK" || _fail "$SOCK does not answer beside $EXTRA"
	assert_eq 600 "$(stat -c %a "$EXTRA")" "mode of $EXTRA"
}
run_test "the same --listen unix: twice is one listener" t_same_path_twice
