#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# How long an allowed answer's address stays reachable, against the outside world of
# net-world.sh whose DNS answers with a TTL of 1 s, the controller keeping answers PIN_MS
# (--egress-pin-min-ms): a restricted workspace allowing echo.example.test
#   window       after the TTL, the literal address still connects within the window; after the
#                window it is refused (and counters.pinsExpired counts exactly that one)
#   refresh      an allowed answer again inside the window carries the address past the first
#                answer's end
#   established  a connection opened while pinned carries data both ways after its pin ended,
#                while a new connection to the same address is refused
# Each wait is bounded and measured from the moment the answer was known to be given; a run
# that came too late to tell (a loaded machine) says so rather than pass or fail by chance.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

NET_RANGE=${NET_RANGE:-10.$((200 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=stq$(($$ % 1000000))
PIN_MS=6000
HOLD_PORT=7010

net_prereqs "$NET_RANGE"
if ! world_up; then
	not_ok "world comes up" "see the diagnostics above"
	exit 1
fi
world_route_from "$NET_RANGE" || exit 1
world_dns_ttl 1

require_container_controller "$NET_FLAG_RANGE" "$NET_RANGE" "$NET_FLAG_BRIDGE" "$NET_BRIDGE" \
	"$NET_FLAG_DNS" "$WORLD_DNS:53" --egress-pin-min-ms "$PIN_MS" "${NET_WORLD_FLAGS[@]}"

expect_reach() {
	[[ $PROBE_RC == 0 && $(pval connect) == ok ]] && return 0
	_fail "$1: expected to connect, got rc $PROBE_RC: $(tr '\n' ' ' <<<"$PROBE_OUT")"
}
_probe_blocked() {
	nprobe "$WS" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" && [[ $PROBE_RC == 1 && $(pval connect) != ok ]]
}

now_ms() { date +%s%3N; }
# sleep_until MS: sleeps until the clock reads MS (epoch milliseconds).
sleep_until() {
	local left=$(($1 - $(now_ms)))
	((left > 0)) && sleep "$((left / 1000)).$(printf '%03d' $((left % 1000)))"
	return 0
}

# counters WS: PINNED and EXPIRED from GET …/network.
counters() {
	api -q GET "/v1/workspaces/$1/network"
	[[ $STATUS == 200 ]] || _fail "GET network: HTTP $STATUS $(_short "$BODY")" || return 1
	PINNED=$(j .counters.pinned)
	EXPIRED=$(j .counters.pinsExpired)
}
_expired_reaches() {
	counters "$1" && ((EXPIRED >= $2))
}

WS=
test_window() {
	local t1 t2 allow
	allow=$(jq -nc --arg e "$WORLD_ECHO_NAME" '{allow: [{domain: $e}]}')
	new_cws WS "$(jq -nc --argjson e "$allow" '{network: "restricted", egress: $e}')" || return 1
	counters "$WS" || return 1
	assert_eq "0 0" "$PINNED $EXPIRED" "pinned, pinsExpired of a new workspace" || return 1
	# Before any answer the address is refused (the negative control of what follows).
	_probe_blocked || _fail "the echo's address reached before any answer: $PROBE_OUT" || return 1
	nprobe "$WS" tcp "$WORLD_ECHO_NAME" "$WORLD_ECHO_PORT" || return 1
	t1=$(now_ms) # the answer was given before this
	expect_reach "$WORLD_ECHO_NAME by name" || return 1
	assert_probe resolved "$WORLD_ECHO"
	# The client "cached" the address: it connects to the literal once the 1 s TTL is over.
	sleep_until $((t1 + 1500))
	nprobe "$WS" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	t2=$(now_ms)
	if ((t2 - t1 >= PIN_MS)); then
		_fail "too slow to tell: the probe after the TTL ended $((t2 - t1)) ms after the answer (the window is $PIN_MS ms)"
		return 1
	fi
	expect_reach "the literal address after the TTL, inside the window" || return 1
	counters "$WS" || return 1
	assert_eq "1 0" "$PINNED $EXPIRED" "pinned, pinsExpired inside the window" || return 1
	# After the window: counted once, then refused.
	wait_for -t 30 _expired_reaches "$WS" 1 || _fail "pinsExpired still $EXPIRED 30 s after the answer" || return 1
	wait_for -t 10 _probe_blocked || _fail "the address still reached after the window: $PROBE_OUT" || return 1
	counters "$WS" || return 1
	assert_eq "0 1" "$PINNED $EXPIRED" "pinned, pinsExpired after the window"
}

test_refresh() {
	[[ -n $WS ]] || return 1
	local t1 t2 t3
	nprobe "$WS" dns "$WORLD_ECHO_NAME" || return 1
	t1=$(now_ms)
	assert_probe answer "$WORLD_ECHO" || return 1
	sleep_until $((t1 + PIN_MS / 2))
	t2=$(now_ms) # the refresh is given after this
	nprobe "$WS" dns "$WORLD_ECHO_NAME" || return 1
	assert_probe answer "$WORLD_ECHO" || return 1
	# Past the first answer's end (at or before t1 + PIN_MS), inside the second's.
	sleep_until $((t1 + PIN_MS + 300))
	nprobe "$WS" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	t3=$(now_ms)
	if ((t3 - t2 >= PIN_MS)); then
		_fail "too slow to tell: the probe ended $((t3 - t2)) ms after the refresh (the window is $PIN_MS ms)"
		return 1
	fi
	expect_reach "the address past the first answer's window, refreshed by the second" || return 1
	counters "$WS" || return 1
	assert_eq "1 1" "$PINNED $EXPIRED" "pinned, pinsExpired after the refresh (nothing expired)" || return 1
	wait_for -t 30 _expired_reaches "$WS" 2 || _fail "pinsExpired still $EXPIRED after the refreshed window" || return 1
	wait_for -t 10 _probe_blocked || _fail "the address still reached after the refreshed window: $PROBE_OUT" || return 1
	counters "$WS" || return 1
	assert_eq "0 2" "$PINNED $EXPIRED" "pinned, pinsExpired after the refreshed window"
}

# A line echo in the world on WORLD_ECHO:HOLD_PORT for one connection, logging what it gets.
hold_server() {
	ip netns exec "$WORLD_NS" python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
open(sys.argv[4], "w").write("ready\n")
s.settimeout(120)
c, _ = s.accept()
c.settimeout(120)
with open(sys.argv[3], "a") as log:
    for line in c.makefile("rb"):
        log.write(line.decode()); log.flush()
        c.sendall(b"echo " + line)
        if line.strip() == b"after":
            break
c.close()
' "$WORLD_ECHO" "$HOLD_PORT" "$TMP/hold.log" "$TMP/hold.ready" >"$TMP/hold.err" 2>&1 </dev/null &
	_WORLD_PIDS+=($!)
	wait_for -t 30 test -s "$TMP/hold.ready" || _fail "the hold server did not start: $(cat "$TMP/hold.err")"
}

test_established() {
	[[ -n $WS ]] || return 1
	local run expired
	: >"$TMP/hold.log"
	hold_server || return 1
	counters "$WS" || return 1
	expired=$EXPIRED
	nprobe "$WS" dns "$WORLD_ECHO_NAME" || return 1
	assert_probe answer "$WORLD_ECHO" || return 1
	# One connection: a line now, the next once /tmp/go exists (60 s at most).
	run_start "$WS" "$(json_cmd "(echo before; i=0; while [ ! -e /tmp/go ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done; echo after) | busybox nc $WORLD_ECHO $HOLD_PORT" '. + {timeoutMs: 90000}')" || return 1
	run=$RUN
	wait_for -t 10 grep -qx before "$TMP/hold.log" || _fail "the connection carried nothing while pinned: $(cat "$TMP/hold.log" "$TMP/hold.err")" || return 1
	# The pin ends: counted, and a new connection is refused.
	wait_for -t 30 _expired_reaches "$WS" $((expired + 1)) || _fail "pinsExpired still $EXPIRED" || return 1
	wait_for -t 10 _probe_blocked || _fail "the address still reached after the window: $PROBE_OUT" || return 1
	run_is_running "$WS" "$run" || _fail "the held connection's run ended early: $(j '{status, stdout, stderr}')" || return 1
	# The open connection still carries data both ways.
	run_cmd "$WS" "touch /tmp/go" || return 1
	run_wait "$WS" "$run" 30 || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "the held connection's run ($(j .stderr))" || return 1
	assert_eq $'echo before\necho after' "$(j .stdout | tr -d '\r')" "what came back on the held connection" || return 1
	grep -qx after "$TMP/hold.log" || _fail "the world did not get the line sent after the pin ended: $(cat "$TMP/hold.log")"
}

run_test window test_window
run_test refresh test_refresh
run_test established test_established
