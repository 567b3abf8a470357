#!/bin/bash
# run-all: slow: 90 to 180 s (about 100 MB of output written and read, byte-compared)
# A follower that falls behind is caught up from what is still kept, never told a gap for a
# kept byte. Each case compares what the follower received with the stored run (or attempt)
# byte for byte (slow-follow.py compare): every kept byte delivered exactly, chunks and gaps
# covering each stream from 0 to its byte count, and no gap over a kept byte.
# - A finished run with 8 MiB kept per stream (more than a follower's queue) replayed over the
#   event stream by curl, and over a WebSocket by a client that stalls 1 s before it reads:
#   exactly the kept bytes, and ONE gap, the truncated middle, at its exact offset and length.
# - A run writing about 20 MB as fast as it can, followed live over the event stream and over a
#   WebSocket by a client that stalls, then reads slowly through a small receive buffer.
# - The same for a follower of a service's logs.
# - A run that keeps 8 MiB per stream, still running after writing about 12 MB on stdout and
#   6 MB on stderr fast, then followed over the event stream and a WebSocket: the agent resends
#   all it keeps (about 14 MB, more than its 4 MiB link limit) and then the live output.
. "$(dirname "$0")/lib.sh"

FOLLOW=$SRC/test/integration/slow-follow.py
MAX=8388608

require_controller
new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
WS_HOME=$(j .home)
WORKDIR=$(j .workdir)

# compare PREFIX STORED [--exact]: the comparison's JSON in R; fails the test on a problem.
compare() {
	R=$(python3 "$FOLLOW" compare "$@")
	note "$(basename "$1"): $(jq -c '{stdout: .stdout | del(.gaps), stderr: .stderr | del(.gaps),
		gaps: [.stdout.gaps, .stderr.gaps]}' <<<"$R")"
	[[ $(j .ok "$R") == true ]] && return 0
	_fail "$(basename "$1"): $(j .problems "$R")"
}

# The finished run: 6,500,000 random bytes in base64 (8,780,704 bytes with the newlines) on
# stdout, 7,000,000 (9,456,144) on stderr: both truncated, 4 MiB of head and 4 MiB of tail kept.
BIG_RUN=
big_run() {
	[[ -n $BIG_RUN ]] && return 0
	run_cmd "$WS" 'head -c 6500000 /dev/urandom | base64; head -c 7000000 /dev/urandom | base64 >&2' \
		".maxOutputBytes = $MAX | .timeoutMs = 120000" || return 1
	assert_eq exited "$(j .status)" "the run's status" || return 1
	printf '%s' "$BODY" >"$TMP/big.json"
	BIG_RUN=$RUN
}

# The one gap of a finished stream: the middle between the head and the tail.
check_middle_gap() {
	local s total
	for s in stdout stderr; do
		total=$(j ".${s}Bytes" "$(cat "$TMP/big.json")")
		assert_eq "[[$((MAX / 2)),$((total - MAX))]]" "$(j ".$s.gaps" "$R")" "$s: the gap"
	done
}

t_finished_sse() {
	big_run || return 1
	curl -sN --max-time 120 --unix-socket "$SOCK" \
		"http://station/v1/workspaces/$WS/commands/$BIG_RUN/output" >"$TMP/fin-sse.txt" ||
		_fail "curl: exit $?"
	python3 "$FOLLOW" parse-sse "$TMP/fin-sse.txt" --out "$TMP/fin-sse"
	compare "$TMP/fin-sse" "$TMP/big.json" --exact || return 1
	check_middle_gap
}

t_finished_ws() {
	big_run || return 1
	python3 "$FOLLOW" follow "$SOCK" "/v1/workspaces/$WS/commands/$BIG_RUN/output" \
		--mode ws --out "$TMP/fin-ws" --stall-ms 1000 --rcvbuf 8192
	compare "$TMP/fin-ws" "$TMP/big.json" --exact || return 1
	check_middle_gap
}

# live_run MODE: a run that waits for its follower's first chunk, then writes about 20 MB on
# stdout as fast as it can, and 400,000 bytes on stderr; the follower stalls 2 s, then reads
# 16 KiB every 2 ms through an 8 KiB receive buffer.
live_run() {
	rm -f "$WS_HOME/go"
	run_start "$WS" "$(json_cmd 'echo ready; while [ ! -e "$HOME/go" ]; do sleep 0.02; done
		head -c 15000000 /dev/urandom | base64; head -c 300000 /dev/urandom | base64 >&2' \
		".maxOutputBytes = $MAX | .timeoutMs = 120000")" || return 1
	python3 "$FOLLOW" follow "$SOCK" "/v1/workspaces/$WS/commands/$RUN/output" --mode "$1" \
		--out "$TMP/live-$1" --go-file "$WS_HOME/go" --stall-ms 2000 --sleep-ms 2 \
		--read-bytes 16384 --rcvbuf 8192
	run_wait "$WS" "$RUN" || return 1
	printf '%s' "$BODY" >"$TMP/live-$1.stored.json"
	assert_eq exited "$(j .status)" "the run's status" || return 1
	compare "$TMP/live-$1" "$TMP/live-$1.stored.json"
}

t_live_sse() { live_run sse; }
t_live_ws() { live_run ws; }

# service_logs MODE: a service that waits for its follower, then writes as live_run's run does
# and then sleeps; the follower as live_run's, until the attempt ends (stopped once the service
# wrote everything). A service keeps the worker's default output bytes (64 KiB of head, 64 KiB
# of tail per stream).
service_logs() {
	local name=slow-$1 stored
	rm -f "$WORKDIR/go-$1"
	api -q POST "/v1/workspaces/$WS/services" "$(jq -nc --arg n "$name" --arg g "go-$1" '{name: $n,
		command: ("echo ready; while [ ! -e " + $g + " ]; do sleep 0.02; done
		head -c 15000000 /dev/urandom | base64; head -c 300000 /dev/urandom | base64 >&2
		touch " + $g + ".done; sleep 600")}')"
	assert_status 201 "create service" || return 1
	python3 "$FOLLOW" follow "$SOCK" "/v1/workspaces/$WS/services/$name/logs?follow=1" \
		--mode "$1" --out "$TMP/svc-$1" --go-file "$WORKDIR/go-$1" --stall-ms 2000 \
		--sleep-ms 2 --read-bytes 16384 --rcvbuf 8192 &
	local pid=$!
	wait_for -t 60 test -e "$WORKDIR/go-$1.done" || _fail "the service did not write in 60 s"
	api -q POST "/v1/workspaces/$WS/services/$name/stop" '{}'
	wait "$pid"
	api -q GET "/v1/workspaces/$WS/services/$name"
	stored=$(j '.attempts[-1]')
	printf '%s' "$stored" >"$TMP/svc-$1.stored.json"
	compare "$TMP/svc-$1" "$TMP/svc-$1.stored.json"
}

t_service_sse() { service_logs sse; }
t_service_ws() { service_logs ws; }

# big_resend MODE: a run (8 MiB kept per stream) that writes 12,157,895 bytes of base64 on
# stdout and 6,078,948 on stderr as fast as it can, then a line on each every 20 ms until its
# follower has its first chunk, then 50 more lines and exits. The follower starts after the fast
# part, so the agent has 8 MiB of stdout and all of stderr to resend; it reads as fast as it can.
# compare: every byte of the stored head and tail delivered, gaps only over the lost middle.
big_resend() {
	rm -f "$WS_HOME/wrote-$1" "$WS_HOME/stop-$1"
	run_start "$WS" "$(json_cmd 'head -c 9000000 /dev/urandom | base64
		head -c 4500000 /dev/urandom | base64 >&2
		touch "$HOME/wrote-'"$1"'"; i=0
		while [ ! -e "$HOME/stop-'"$1"'" ] || [ $i -lt 50 ]; do
			[ -e "$HOME/stop-'"$1"'" ] && i=$((i + 1))
			echo "out line $i"; echo "err line $i" >&2; sleep 0.02
		done' ".maxOutputBytes = $MAX | .timeoutMs = 120000")" || return 1
	wait_for -t 60 test -e "$WS_HOME/wrote-$1" || _fail "the run did not write in 60 s" || return 1
	python3 "$FOLLOW" follow "$SOCK" "/v1/workspaces/$WS/commands/$RUN/output" --mode "$1" \
		--out "$TMP/resend-$1" --go-file "$WS_HOME/stop-$1"
	run_wait "$WS" "$RUN" || return 1
	printf '%s' "$BODY" >"$TMP/resend-$1.stored.json"
	assert_eq exited "$(j .status)" "the run's status" || return 1
	compare "$TMP/resend-$1" "$TMP/resend-$1.stored.json"
}

t_resend_sse() { big_resend sse; }
t_resend_ws() { big_resend ws; }

run_test "finished run, 8 MiB kept per stream, replayed over SSE: every kept byte" t_finished_sse
run_test "finished run, 8 MiB kept per stream, replayed over WebSocket: every kept byte" t_finished_ws
run_test "live run of 20 MB, slow SSE follower: every kept byte, gaps only for bytes not kept" t_live_sse
run_test "live run of 20 MB, slow WebSocket follower: every kept byte, gaps only where not kept" t_live_ws
run_test "service logs of 20 MB, slow SSE follower: every kept byte" t_service_sse
run_test "service logs of 20 MB, slow WebSocket follower: every kept byte" t_service_ws
run_test "running run with 14 MB kept, new SSE follower: every kept byte, then live output" t_resend_sse
run_test "running run with 14 MB kept, new WebSocket follower: every kept byte, then live" t_resend_ws
