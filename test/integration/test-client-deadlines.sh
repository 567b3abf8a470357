#!/bin/bash
# The CLI's deadlines (docs/cli.md, "Deadlines"): a worker that accepts connections and never
# answers (hang-worker.py: silent, or a head then a body that never comes, or a start answered
# and then nothing), listed beside a real controller, makes ls, exec and status fail within
# STATION_TIMEOUT_MS (2 s here) with a message naming it; SIGTERM during a start or a cancel
# that gets no answer ends exec within the 5 s cancel deadline, saying so. Positive controls:
# the same commands on the real controller succeed with the same 2 s deadline, long-polls the
# server holds longer than it (exec --json of sleep 3) and a followed run silent for 3 s
# included. And the CLI's fleet messages: a command about no workspace (events, image ls, token
# list) with a worker list says to add --worker; a create on a worker listed under a name it does
# not have is refused naming both names, nothing created.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

declare -A HANG_PORT=() HANG_PID=()
for mode in silent stall-body start-only quiet-stream; do
	python3 "$SRC/test/integration/hang-worker.py" --mode "$mode" >"$TMP/hang-$mode.port" &
	HANG_PID[$mode]=$!
	if ! wait_for -t 10 test -s "$TMP/hang-$mode.port"; then
		not_ok "hang worker $mode starts" "it printed no port within 10 s"
		exit 1
	fi
	HANG_PORT[$mode]=$(cat "$TMP/hang-$mode.port")
done
stop_hang_workers() {
	local rc=$? pid
	for pid in "${HANG_PID[@]}"; do
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	(exit "$rc") # _cleanup takes the script's status from $?
	_cleanup
}
trap stop_hang_workers EXIT

HANG_ID=w2-aaaaaaaaaaaaaaaaaaaaaaaaaa

# fleet MODE ARGS...: the CLI over the worker list "test" (the controller) and "w2" (the hang
# worker in MODE), with a 2 s deadline, bounded by 60 s; sets OUT, ERR, RC and MS (elapsed).
fleet() {
	local mode=$1 started=${EPOCHREALTIME/./}
	shift
	STATION_WORKERS="test=$URL,w2=http://127.0.0.1:${HANG_PORT[$mode]}" STATION_TOKEN=$TOKEN \
		STATION_TIMEOUT_MS=2000 timeout -k 5 60 "$CLI_BIN" "$@" >"$TMP/out" 2>"$TMP/err"
	RC=$?
	MS=$(((${EPOCHREALTIME/./} - started) / 1000))
	OUT=$(cat "$TMP/out")
	ERR=$(cat "$TMP/err")
}

# A hung worker: named, with its URL and the deadline, within 20 s.
assert_hung() {
	local mode=$1 what=$2
	# 2 s, or 2.02 s for exec's start, which asks the server to hold it 20 ms
	assert_match "worker w2 \(http://127\.0\.0\.1:${HANG_PORT[$mode]}\) did not answer within 2(\.02)? s" \
		"$ERR" "$what: stderr" || return 1
	assert_le "$MS" 20000 "$what: milliseconds taken" || return 1
}

WS=
t_workspace() {
	new_ws WS || return 1
	assert_match '^test-' "$WS" "the controller's workspace id"
}
run_test "a workspace on the real worker" t_workspace || exit 1

t_ls_names_the_hung_worker() {
	local mode
	for mode in silent stall-body; do
		fleet "$mode" ls
		assert_eq 0 "$RC" "ls with w2 $mode: exit status (test answered)" || return 1
		assert_contains "$WS" "$OUT" "ls with w2 $mode lists test's workspace" || return 1
		assert_hung "$mode" "ls with w2 $mode" || return 1
	done
}
run_test "ls: a worker that never answers is named within the deadline" t_ls_names_the_hung_worker

t_calls_on_its_ids_fail_in_time() {
	local mode
	for mode in silent stall-body; do
		fleet "$mode" exec "$HANG_ID" true
		assert_eq 2 "$RC" "exec on w2 $mode: exit status" || return 1
		assert_hung "$mode" "exec on w2 $mode" || return 1
		fleet "$mode" status "$HANG_ID" r1
		assert_eq 2 "$RC" "status on w2 $mode: exit status" || return 1
		assert_hung "$mode" "status on w2 $mode" || return 1
	done
}
run_test "exec and status on a hung worker's id fail within the deadline, naming it" \
	t_calls_on_its_ids_fail_in_time

t_one_controller_url() {
	local started=${EPOCHREALTIME/./} err
	err=$(STATION_TIMEOUT_MS=2000 timeout -k 5 60 "$CLI_BIN" --url "http://127.0.0.1:${HANG_PORT[silent]}" \
		--token x ls 2>&1 >/dev/null)
	assert_eq 2 "$?" "exit status" || return 1
	assert_contains "http://127.0.0.1:${HANG_PORT[silent]} did not answer within 2 s" "$err" "stderr" || return 1
	assert_le $(((${EPOCHREALTIME/./} - started) / 1000)) 20000 "milliseconds taken"
}
run_test "--url of a controller that never answers: fails within the deadline" t_one_controller_url

# Positive controls: the same deadline, the real worker.
t_real_worker_served() {
	fleet silent exec "$WS" echo hi
	assert_eq 0 "$RC" "exec on test: exit status ($ERR)" || return 1
	assert_eq hi "$OUT" "exec on test: output" || return 1
	fleet silent status "$WS" nosuchrun
	assert_contains "not" "$ERR" "status of an unknown run on test is the API's error" || return 1
	assert_eq 1 "$RC" "status of an unknown run: exit status" || return 1
}
run_test "control: the real worker answers with the same 2 s deadline" t_real_worker_served

t_long_poll_beyond_the_deadline() {
	fleet silent exec --json "$WS" sleep 3
	assert_eq 0 "$RC" "exec --json sleep 3: exit status ($ERR)" || return 1
	assert_eq 0 "$(j .exitCode "$OUT")" "exec --json sleep 3: exitCode" || return 1
	assert_le 3000 "$MS" "it took the 3 s" || return 1
	fleet silent exec "$WS" sh -c 'sleep 3; echo late'
	assert_eq 0 "$RC" "followed exec silent for 3 s: exit status ($ERR)" || return 1
	assert_eq late "$OUT" "followed exec: output" || return 1
}
run_test "control: a long-poll held longer than the deadline, and a silent follow, succeed" \
	t_long_poll_beyond_the_deadline

# SIGTERM while the start gets no answer (no deadline of its own here: 60 s): exec gives it 5 s.
t_sigterm_during_hung_start() {
	local pid started rc err
	STATION_WORKERS="test=$URL,w2=http://127.0.0.1:${HANG_PORT[silent]}" STATION_TOKEN=$TOKEN \
		STATION_TIMEOUT_MS=60000 "$CLI_BIN" exec "$HANG_ID" sleep 100 >/dev/null 2>"$TMP/err" &
	pid=$!
	sleep 0.5 # the start is under way (nothing can answer it)
	started=${EPOCHREALTIME/./}
	kill -TERM "$pid"
	if ! wait_for -t 30 _pid_gone "$pid"; then
		kill -KILL "$pid"
		_fail "exec still running 30 s after SIGTERM: $(cat "$TMP/err")"
	fi
	wait "$pid"
	rc=$?
	err=$(cat "$TMP/err")
	assert_eq 2 "$rc" "exit status" || return 1
	assert_contains "the start of the command had no answer 5 s after the signal" "$err" "stderr" || return 1
	assert_contains "worker w2" "$err" "stderr names the worker" || return 1
	assert_le $(((${EPOCHREALTIME/./} - started) / 1000)) 15000 "milliseconds from SIGTERM to exit"
}
run_test "SIGTERM during a start that gets no answer: exec ends within the cancel deadline" \
	t_sigterm_during_hung_start

# A start answered, then nothing: the follow hangs, SIGTERM cancels, the cancel hangs too.
t_sigterm_then_hung_cancel() {
	local pid started rc err
	STATION_WORKERS="test=$URL,w2=http://127.0.0.1:${HANG_PORT[start-only]}" STATION_TOKEN=$TOKEN \
		STATION_TIMEOUT_MS=60000 "$CLI_BIN" exec "$HANG_ID" sleep 100 >/dev/null 2>"$TMP/err" &
	pid=$!
	sleep 1 # started and following (the hang worker answers the start at once)
	started=${EPOCHREALTIME/./}
	kill -TERM "$pid"
	if ! wait_for -t 30 _pid_gone "$pid"; then
		kill -KILL "$pid"
		_fail "exec still running 30 s after SIGTERM: $(cat "$TMP/err")"
	fi
	wait "$pid"
	rc=$?
	err=$(cat "$TMP/err")
	assert_eq 2 "$rc" "exit status" || return 1
	assert_contains "cannot cancel run r1: worker w2 (http://127.0.0.1:${HANG_PORT[start-only]}) did not answer within 5 s" \
		"$err" "stderr" || return 1
	assert_le $(((${EPOCHREALTIME/./} - started) / 1000)) 15000 "milliseconds from SIGTERM to exit"
}
run_test "SIGTERM, then a cancel that gets no answer: exec ends within the cancel deadline" \
	t_sigterm_then_hung_cancel

# ---------------------------------------------------------------------------------------------
# Event streams: the server's heartbeat every 15 s on a quiet one, and the client's deadline of
# STATION_TIMEOUT_MS + 15 s of silence in one.

# The comment line ": ping" comes on a quiet GET /v1/events 15 s after its opening comment.
t_heartbeat_on_a_quiet_stream() {
	local pid started seen=
	curl -sN --max-time 40 --unix-socket "$SOCK" -H 'Accept: text/event-stream' \
		"http://x/v1/events?types=terminal" >"$TMP/sse" 2>/dev/null &
	pid=$!
	started=${EPOCHREALTIME/./}
	wait_for -t 30 grep -qx ': ping' "$TMP/sse" && seen=$(((${EPOCHREALTIME/./} - started) / 1000))
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[[ -n $seen ]] || _fail "no ': ping' line within 30 s; the stream held: $(tr '\n' '|' <"$TMP/sse")" || return 1
	assert_le 14000 "$seen" "milliseconds to the first heartbeat" || return 1
	assert_le "$seen" 20000 "milliseconds to the first heartbeat" || return 1
	note "first heartbeat after $seen ms"
}
run_test "server: a quiet event stream gets the heartbeat comment after 15 s" \
	t_heartbeat_on_a_quiet_stream

# A stream that began and then says nothing (no heartbeat): ends within 2 s + 15 s naming w2.
t_events_on_a_hung_stream() {
	fleet quiet-stream --worker w2 events
	assert_eq 2 "$RC" "events on w2: exit status ($ERR)" || return 1
	assert_contains "worker w2 (http://127.0.0.1:${HANG_PORT[quiet-stream]}) did not answer within 17 s" \
		"$ERR" "events on w2: stderr" || return 1
	assert_le 16000 "$MS" "milliseconds taken" || return 1
	assert_le "$MS" 30000 "milliseconds taken"
}
run_test "events on a stream that stays silent past the deadline and heartbeat: fails naming it" \
	t_events_on_a_hung_stream

# Control: the controller's quiet stream, the same 2 s deadline, stays open for 20 s.
t_events_quiet_stream_stays_open() {
	local started=${EPOCHREALTIME/./} rc
	STATION_TIMEOUT_MS=2000 timeout 20 "$CLI_BIN" --socket "$SOCK" events --types terminal \
		>"$TMP/out" 2>"$TMP/err"
	rc=$?
	assert_eq 124 "$rc" "events ended by timeout(1) after 20 s, not by itself ($(cat "$TMP/err"))" || return 1
	assert_eq "" "$(cat "$TMP/err")" "stderr" || return 1
	assert_le 19000 $(((${EPOCHREALTIME/./} - started) / 1000)) "milliseconds it stayed open"
}
run_test "control: events on a quiet stream stays open past the deadline (the heartbeat)" \
	t_events_quiet_stream_stays_open

# ---------------------------------------------------------------------------------------------
# Fleet messages (the hang worker is not asked: these fail before any request).

t_one_worker_commands_say_add_worker() {
	local args
	for args in "events --count 1" "image ls" "token list"; do
		# shellcheck disable=SC2086 # the words of the command
		fleet silent $args
		assert_eq 64 "$RC" "$args: exit status" || return 1
		assert_contains "station-sandbox ${args%% -*}: with a worker list, this goes to one worker: add --worker NAME before the command (one of test,w2)" \
			"$ERR" "$args: stderr" || return 1
	done
	# Positive control: with --worker it is served.
	fleet silent --worker test image ls --json
	assert_eq 0 "$RC" "--worker test image ls: exit status ($ERR)" || return 1
	assert_eq array "$(j type "$OUT")" "--worker test image ls: a list" || return 1
}
run_test "events, image ls, token list with a worker list: say to add --worker" \
	t_one_worker_commands_say_add_worker

# The controller is "test"; listed as "w9" its ids ("test-…") would not route back to w9.
t_create_on_a_misnamed_worker() {
	local before after out err rc
	before=$(cli ls --json | jq length)
	# Named (create --worker w9), and chosen by placement (no --worker).
	out=$(STATION_WORKERS="w9=$URL" STATION_TOKEN=$TOKEN timeout -k 5 60 "$CLI_BIN" create \
		--worker w9 2>"$TMP/err")
	rc=$?
	err=$(cat "$TMP/err")
	assert_eq 1 "$rc" "create --worker w9: exit status (printed: $out)" || return 1
	assert_eq "" "$out" "create --worker w9: no id printed" || return 1
	assert_contains "worker w9 ($URL) answers as worker 'test'" "$err" "create --worker w9: stderr" || return 1
	out=$(STATION_WORKERS="w9=$URL" STATION_TOKEN=$TOKEN timeout -k 5 60 "$CLI_BIN" create 2>"$TMP/err")
	rc=$?
	err=$(cat "$TMP/err")
	assert_eq 1 "$rc" "create: exit status (printed: $out)" || return 1
	assert_eq "" "$out" "create: no id printed" || return 1
	assert_match "worker w9 \\($URL\\).*test" "$err" "create: stderr names both" || return 1
	after=$(cli ls --json | jq length)
	assert_eq "$before" "$after" "workspaces on the controller (nothing created)" || return 1
	# Positive control: listed under its own name, the create goes through.
	out=$(STATION_WORKERS="test=$URL" STATION_TOKEN=$TOKEN timeout -k 5 120 "$CLI_BIN" create 2>"$TMP/err")
	assert_eq 0 "$?" "create on test: exit status ($(cat "$TMP/err"))" || return 1
	assert_match '^test-' "$out" "the id printed" || return 1
	WORKSPACES+=("$out")
}
run_test "create on a worker listed under a name it does not have: refused, naming both" \
	t_create_on_a_misnamed_worker
