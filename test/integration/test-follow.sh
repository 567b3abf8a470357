#!/bin/bash
# station_run_follow of the client library over WebSocket (follow-check): against a real
# controller, exact bytes and the run handed back; a client that falls behind sees gaps whose
# bytes plus the delivered ones are exactly stdoutBytes, offsets contiguous; the interrupt check
# stops a follow that waits; a service's logs (station_service_logs) live and stored, ending with
# the service, and an unknown service refused before any upgrade. Against a hostile server of the helper's own: gaps, a ping and
# unknown messages handled as the protocol says (positive control); oversize, masked, unknown
# opcode, short or unknown-stream binary, bad JSON, a bad gap, a non-terminal end, an error
# message, a refused or endless upgrade answer: each a clear error; a server that closes
# mid-stream (with or without a close frame) is reconnected a bounded number of times, the
# replayed bytes skipped, then reported; a server that sends nothing is interrupted.
. "$(dirname "$0")/lib.sh"

CHECK=$BUILD/test/helpers/follow-check

require_controller
new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
WS_HOME=$(j .home)

# fc ARGS...: the helper's JSON in R.
fc() {
	R=$("$CHECK" "$@" 2>"$TMP/fc-err")
	[[ -n $R ]] || R='{}'
}

# The run prints a line, then waits until the follow has received it: the rest is live. The
# live part (900,000 bytes) is less than what the server queues for one WebSocket (16 MiB), so
# no byte can be dropped for this watcher however slowly the machine lets it read: exact bytes
# and no gap are certain, not likely. A client that falls behind is the next test.
t_exact_bytes() {
	rm -f "$WS_HOME/go"
	run_start "$WS" "$(json_cmd 'echo ready; while [ ! -e "$HOME/go" ]; do sleep 0.02; done
		head -c 900000 /dev/urandom; printf err >&2; exit 3' '.timeoutMs = 60000')" || return 1
	fc real "$SOCK" "$WS" "$RUN" --go-file "$WS_HOME/go"
	assert_eq 0 "$(j .r "$R")" "follow returns 0" || { diag "$R"; return 1; }
	assert_eq 900006 "$(j .delivered.stdout "$R")" "stdout bytes delivered"
	assert_eq 3 "$(j .delivered.stderr "$R")" "stderr bytes delivered"
	assert_eq '[]' "$(j .gaps "$R")" "no gap"
	assert_eq 0 "$(j .offsetErrors "$R")" "offsets contiguous"
	assert_eq exited "$(j .end.status "$R")" "end: status"
	assert_eq 3 "$(j .end.exitCode "$R")" "end: exitCode"
	assert_eq 900006 "$(j .end.stdoutBytes "$R")" "end: stdoutBytes"
	# The bytes came through on_output: the run handed back has no output fields.
	assert_eq false "$(j '.end | has("stdout") or has("stdoutTail") or has("encoding")' "$R")" \
		"end: no output fields"
}

# Live: the client sleeps 3 s in its first callback while the run writes 64 MiB.
t_slow_client_gap() {
	local total=$((6 + 67108864))
	rm -f "$WS_HOME/go"
	run_start "$WS" "$(json_cmd 'echo ready; while [ ! -e "$HOME/go" ]; do sleep 0.02; done
		head -c 67108864 /dev/zero' '.timeoutMs = 120000')" || return 1
	fc real "$SOCK" "$WS" "$RUN" --go-file "$WS_HOME/go" --slow-ms 3000
	assert_eq 0 "$(j .r "$R")" "follow returns 0" || { diag "$(_short "$R")"; return 1; }
	assert_eq "$total" "$(j .end.stdoutBytes "$R")" "end: stdoutBytes"
	assert_le 1 "$(j '.gaps | length' "$R")" "at least one gap"
	assert_eq "$total" "$(($(j .delivered.stdout "$R") + $(j .gapBytes "$R")))" \
		"bytes delivered + bytes in gaps"
	assert_eq 0 "$(j .offsetErrors "$R")" "every gap and output starts where the stream stood"
}

# The agent grows a run's stdout and stderr pipes to 1 MiB (pipe-max-size at most) once the
# command has written 64 KiB to them. The probe writes 192 KiB to stdout first: it cannot
# finish before the agent has read 128 KiB, which takes a read after the one that passed
# 64 KiB, and the agent grows the pipe before that next read. Its stderr, written nothing to,
# and a pipe the command makes itself keep the kernel's 64 KiB (the positive controls).
t_output_pipe_size() {
	local max want
	max=$(cat /proc/sys/fs/pipe-max-size)
	want=$((max < 1048576 ? max : 1048576))
	((want >= 65536)) || want=65536
	run_cmd "$WS" "python3 -c 'import fcntl, os
os.write(1, b\"x\" * 196608)
r, w = os.pipe()
print(\"\", fcntl.fcntl(1, 1032), fcntl.fcntl(2, 1032), fcntl.fcntl(r, 1032))'" \
		'.maxOutputBytes = 1048576' || return 1
	assert_eq false "$(j .truncated)" "the whole output kept"
	assert_eq "$want 65536 65536" "$(j '.stdout | split(" ") | .[1:] | join(" ")')" \
		"F_GETPIPE_SZ of stdout, stderr, a new pipe"
}

# A watched run writes 64 MiB while the controller is stopped (SIGSTOP): the agent holds the
# pipe unread while its link is backed up, but only for a moment, so the run still writes
# everything and ends; once the controller goes on, the follower gets the rest with the bytes
# dropped meanwhile as gaps, delivered + gaps == stdoutBytes.
t_stopped_controller_never_stops_the_run() {
	local total=$((6 + 67108864)) rc fc_pid
	rm -f "$WS_HOME/go" "$WS_HOME/wrote"
	run_start "$WS" "$(json_cmd 'echo ready; while [ ! -e "$HOME/go" ]; do sleep 0.02; done
		head -c 67108864 /dev/zero; touch "$HOME/wrote"' '.timeoutMs = 120000')" || return 1
	"$CHECK" real "$SOCK" "$WS" "$RUN" --go-file "$WS_HOME/go" >"$TMP/stopped.json" \
		2>"$TMP/fc-err" &
	fc_pid=$!
	wait_for -t 30 test -e "$WS_HOME/go"
	kill -STOP "$CONTROLLER_PID"
	wait_for -t 30 test -e "$WS_HOME/wrote"
	rc=$?
	kill -CONT "$CONTROLLER_PID"
	wait "$fc_pid"
	R=$(cat "$TMP/stopped.json")
	assert_eq 0 "$rc" "the run wrote everything while the controller was stopped" || return 1
	assert_eq 0 "$(j .r "$R")" "follow returns 0" || { diag "$(_short "$R")"; return 1; }
	assert_eq "$total" "$(j .end.stdoutBytes "$R")" "end: stdoutBytes"
	assert_le 1 "$(j '.gaps | length' "$R")" "at least one gap"
	assert_eq "$total" "$(($(j .delivered.stdout "$R") + $(j .gapBytes "$R")))" \
		"bytes delivered + bytes in gaps"
	assert_eq 0 "$(j .offsetErrors "$R")" "every gap and output starts where the stream stood"
}

t_interrupt() {
	run_start "$WS" "$(json_cmd 'printf started; sleep 30' '.timeoutMs = 60000')" || return 1
	fc real "$SOCK" "$WS" "$RUN" --interrupt-ms 300
	assert_eq -4 "$(j .r "$R")" "follow returns -EINTR" || { diag "$R"; return 1; }
	assert_eq interrupted "$(j .error "$R")" "error"
	assert_le "$(j '.ms | floor' "$R")" 3000 "stopped within 3 s"
	api -q POST "/v1/workspaces/$WS/commands/$RUN/cancel"
	assert_eq 200 "$STATUS" "cancel"
}

t_service_logs() {
	rm -f "$WS_HOME/go"
	api -q POST "/v1/workspaces/$WS/services" "$(jq -nc '{name: "talker", command:
		"echo ready; while [ ! -e \"$HOME/go\" ]; do sleep 0.02; done; echo more; echo err >&2"}')"
	assert_eq 201 "$STATUS" "service created" || { diag "$BODY"; return 1; }
	fc logs "$SOCK" "$WS" talker --follow --go-file "$WS_HOME/go"
	assert_eq 0 "$(j .r "$R")" "logs --follow returns 0" || { diag "$R"; return 1; }
	assert_eq 11 "$(j .delivered.stdout "$R")" "stdout: ready, more"
	assert_eq 4 "$(j .delivered.stderr "$R")" "stderr: err"
	assert_eq '[]' "$(j .gaps "$R")" "no gap"
	assert_eq talker "$(j .end.name "$R")" "end: the service"
	# The stored output of the attempt that ended.
	fc logs "$SOCK" "$WS" talker
	assert_eq 0 "$(j .r "$R")" "logs returns 0" || { diag "$R"; return 1; }
	assert_eq 11 "$(j .delivered.stdout "$R")" "stored stdout"
	assert_eq talker "$(j .end.name "$R")" "end: the service"
	fc logs "$SOCK" "$WS" nosuch --follow
	assert_eq -2 "$(j .r "$R")" "unknown service: -ENOENT" || { diag "$R"; return 1; }
	assert_contains nosuch "$(j .error "$R")" "the error names it"
	api -q DELETE "/v1/workspaces/$WS/services/talker"
}

t_fake_positive_control() {
	fc fake gap-end
	assert_eq 0 "$(j .r "$R")" "follow returns 0" || { diag "$R"; return 1; }
	assert_eq 5 "$(j .delivered.stdout "$R")" "stdout bytes"
	assert_eq 1 "$(j .delivered.stderr "$R")" "stderr bytes"
	assert_eq '[{"stream":"stdout","offset":3,"bytes":10}]' "$(j .gaps "$R")" "the gap"
	assert_eq 0 "$(j .offsetErrors "$R")" "offsets"
	assert_eq exited "$(j .end.status "$R")" "end"
}

# fake_error SCENARIO ERRNO TEXT: the follow fails with -ERRNO and an error containing TEXT.
fake_error() {
	fc fake "$1"
	assert_eq "-$2" "$(j .r "$R")" "$1: return" || { diag "$R"; return 1; }
	assert_contains "$3" "$(j .error "$R")" "$1: error"
	assert_eq null "$(j .end "$R")" "$1: no end"
}

t_fake_hostile_frames() {
	fake_error oversize 71 "frame too big" || return 1
	fake_error masked 71 "server frames must not be masked" || return 1
	fake_error bad-opcode 71 "unknown opcode" || return 1
	fake_error short-binary 71 "shorter than its 9-byte prefix" || return 1
	fake_error bad-stream 71 "unknown stream" || return 1
	fake_error bad-json 71 "bad output stream" || return 1
	fake_error bad-gap 71 'without a valid "offset"' || return 1
	fake_error end-not-terminal 71 "end event without a finished run" || return 1
	fake_error error 2 "run r-1 is gone" || return 1
	fake_error refused 2 "run r-1 not found (hostile server)" || return 1
	fake_error big-head 71 "head over 16384 bytes" || return 1
}

t_fake_closes_mid_stream() {
	fake_error close-mid 104 "ended early" || return 1
	assert_eq 4 "$(j .connections "$R")" "connected once and again 3 times"
	assert_eq 5 "$(j .delivered.stdout "$R")" "replayed bytes delivered once"
	assert_eq "/v1/workspaces/w-1/commands/r-1/output?stdoutOffset=5&stderrOffset=0" \
		"$(j .lastPath "$R")" "a reconnect resumes from the offsets delivered"
	fake_error close-frame 104 "the server closed it: 1001 shutting down" || return 1
	assert_eq 4 "$(j .connections "$R")" "connected once and again 3 times"
}

t_fake_hang_interrupted() {
	fc fake hang --interrupt-ms 200
	assert_eq -4 "$(j .r "$R")" "follow returns -EINTR" || { diag "$R"; return 1; }
	assert_le "$(j '.ms | floor' "$R")" 3000 "stopped within 3 s"
}

run_test "exact bytes, the run handed back without output fields" t_exact_bytes
run_test "a client that falls behind: gaps + delivered == stdoutBytes" t_slow_client_gap
run_test "a run's output pipe grows to 1 MiB after 64 KiB (pipe-max-size at most)" t_output_pipe_size
run_test "a stopped controller never stops a watched run; the follow sees the gaps" \
	t_stopped_controller_never_stops_the_run
run_test "the interrupt check stops a waiting follow" t_interrupt
run_test "service logs: live and stored, ending with the service; unknown: 404" t_service_logs
run_test "hostile server, positive control: gap, ping, unknown message, end" t_fake_positive_control
run_test "hostile server: bad frames and messages are clear errors" t_fake_hostile_frames
run_test "a server that closes mid-stream: bounded reconnects, then an error" t_fake_closes_mid_stream
run_test "a server that sends nothing: interrupted" t_fake_hang_interrupted
