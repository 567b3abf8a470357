#!/bin/bash
# Every follower of a service's logs (`…/logs?follow=1`) gets the attempt's kept head, then its
# output live: a second and a third follower of a running attempt get its first line exactly,
# with no gap, as the first did; a follow that starts right after the service was created (the
# controller has not heard of the attempt yet) gets the first line too, ten times in a row; a
# follower that joins while the attempt writes without pause gets no gap for kept bytes.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
WORKDIR=$(j .workdir)

svc_create() {
	api -q POST "/v1/workspaces/$1/services" "$2"
	assert_status 201 "create service" || return 1
}

# svc_is WS NAME JQ-PREDICATE: the service exists and the predicate holds (for wait_for).
svc_is() {
	api -q GET "/v1/workspaces/$1/services/$2"
	[[ $STATUS == 200 ]] && [[ $(j "$3") == true ]]
}

svc_wait() {
	wait_for -t 30 svc_is "$@" && return 0
	_fail "service $2: '$3' not reached in 30 s; last: $(_short "$BODY")"
}

logs_url() {
	echo "http://station/v1/workspaces/$WS/services/$1/logs?follow=1"
}

# sse_stream FILE STREAM: the bytes of STREAM's output events in an event stream, in order.
sse_stream() {
	local b
	grep '^data: {"stream"' "$1" | sed 's/^data: //' |
		jq -r --arg s "$2" 'select(.stream == $s and has("data")) | .data' |
		while read -r b; do base64 -d <<<"$b"; done
}

# sse_offsets_ok FILE STREAM: the output events of STREAM start at 0 and follow each other.
sse_offsets_ok() {
	grep '^data: {"stream"' "$1" | sed 's/^data: //' |
		jq -rs --arg s "$2" '[.[] | select(.stream == $s and has("data"))] |
			reduce .[] as $e ({next: 0, ok: true};
				{next: ($e.offset + ($e.data | @base64d | utf8bytelength)),
				 ok: (.ok and $e.offset == .next)}) | .ok'
}

# follow NAME FILE: a follower in the background; its pid in FOLLOWER.
follow() {
	curl -sN --max-time 120 --unix-socket "$SOCK" "$(logs_url "$1")" >"$2" 2>"$2.err" &
	FOLLOWER=$!
}

t_three_followers() {
	local f p pids=()
	rm -f "$WORKDIR/go-on"
	svc_create "$WS" '{"name":"twice",
		"command":"echo first-line; while [ ! -e go-on ]; do sleep 0.05; done; echo last-line"}' ||
		return 1
	svc_wait "$WS" twice '.state == "running" and .attempts[-1].stdoutBytes == 11' || return 1
	for f in 1 2 3; do
		follow twice "$TMP/f$f"
		pids+=("$FOLLOWER")
		if ! wait_for -t 20 grep -q '^event: ' "$TMP/f$f"; then
			_fail "follower $f got no event in 20 s: $(cat "$TMP/f$f")"
			break
		fi
	done
	touch "$WORKDIR/go-on"
	for p in "${pids[@]}"; do
		wait_for -t 30 _pid_gone "$p" || _fail "a follower did not end with the attempt"
	done
	for f in 1 2 3; do
		[[ -e $TMP/f$f ]] || continue
		assert_eq $'first-line\nlast-line' "$(sse_stream "$TMP/f$f" stdout)" "follower $f: stdout"
		assert_eq 0 "$(grep -c '^event: gap' "$TMP/f$f")" "follower $f: gap events"
		assert_eq 1 "$(grep -c '^event: end' "$TMP/f$f")" "follower $f: end event"
	done
	api -q DELETE "/v1/workspaces/$WS/services/twice"
}

# The service is created and followed in one curl (one connection, no pause between): the
# follow reaches the controller before the agent reported the attempt, every time.
t_follow_at_start() {
	local i got misses=0
	for i in $(seq 1 10); do
		curl -sN --max-time 60 --unix-socket "$SOCK" -o /dev/null \
			-H 'Content-Type: application/json' \
			--data-binary "{\"name\":\"quick$i\",\"command\":\"echo first-$i; sleep 0.5\"}" \
			"http://station/v1/workspaces/$WS/services" \
			--next -sN --max-time 60 --unix-socket "$SOCK" "$(logs_url "quick$i")" \
			>"$TMP/q$i"
		got=$(sse_stream "$TMP/q$i" stdout)
		if [[ $got != "first-$i" ]]; then
			misses=$((misses + 1))
			diag "follow $i right after start: stdout '$got'; $(grep -c '^event: ' "$TMP/q$i") events"
		fi
		api -q DELETE "/v1/workspaces/$WS/services/quick$i"
	done
	assert_eq 0 "$misses" "follows right after start without the first line (of 10)"
}

# A service that writes without pause: a follower joining while another follows gets the kept
# head from offset 0 and contiguous output after it (no gap for bytes the agent keeps).
t_join_chatty() {
	local p1 p2
	rm -f "$WORKDIR/stop-chatty"
	svc_create "$WS" \
		'{"name":"chatty","command":"i=0; while [ ! -e stop-chatty ]; do i=$((i+1)); echo line-$i; done"}' ||
		return 1
	svc_wait "$WS" chatty '.state == "running" and .attempts[-1].stdoutBytes > 1000' || return 1
	follow chatty "$TMP/c1"
	p1=$FOLLOWER
	wait_for -t 20 grep -q '^event: output' "$TMP/c1" || _fail "follower 1 got no output"
	follow chatty "$TMP/c2"
	p2=$FOLLOWER
	wait_for -t 20 grep -q '^event: output' "$TMP/c2" || _fail "follower 2 got no output"
	touch "$WORKDIR/stop-chatty"
	wait_for -t 30 _pid_gone "$p1" || _fail "follower 1 did not end"
	wait_for -t 30 _pid_gone "$p2" || _fail "follower 2 did not end"
	for f in c1 c2; do
		assert_eq line-1 "$(sse_stream "$TMP/$f" stdout | head -n 1)" "$f: first line"
		# The head (64 KiB) is kept, then anything between it and the live part may be gone.
		assert_eq true "$(sse_offsets_ok <(sed '/^event: gap/,$d' "$TMP/$f") stdout)" \
			"$f: output from 0, contiguous up to its first gap"
		assert_eq 0 "$(awk '/^event: gap/{g=1} /^data: /{if (g) print; g=0}' "$TMP/$f" |
			sed 's/^data: //' | jq -s '[.[] | select(.offset < 65536)] | length')" \
			"$f: no gap within the kept head"
	done
	api -q DELETE "/v1/workspaces/$WS/services/chatty"
}

run_test "three followers of a running attempt each get its first line, no gap" t_three_followers
run_test "a follow right after the service starts gets the first line, 10 of 10" t_follow_at_start
run_test "a follower joining a service that writes without pause: head from 0, no gap in it" \
	t_join_chatty
