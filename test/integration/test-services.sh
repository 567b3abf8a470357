#!/bin/bash
# Services: restart policies with exact attempt counts, delays measured from the recorded
# times, stop (signal, then SIGKILL) with no restart, stop during backoff, restart, daemonizing
# commands, supervision while the controller is SIGKILLed, workspace restart with autostart,
# live logs, duplicate names and bad input; the running attempt listed with its byte counts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/service-counts.sh"

require_controller
new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
WORKDIR=$(j .workdir)

# svc_create WS JSON: POST a service; 201 expected.
svc_create() {
	api -q POST "/v1/workspaces/$1/services" "$2"
	assert_status 201 "create service" || return 1
}

svc_get() {
	api -q GET "/v1/workspaces/$1/services/$2"
}

# svc_is WS NAME JQ-PREDICATE: the service exists and the predicate holds (for wait_for).
svc_is() {
	svc_get "$1" "$2"
	[[ $STATUS == 200 ]] && [[ $(j "$3") == true ]]
}

# svc_wait WS NAME JQ-PREDICATE [SECONDS]: waits until the predicate holds; the service is in
# BODY afterwards.
svc_wait() {
	if ! wait_for -t "${4:-15}" svc_is "$1" "$2" "$3"; then
		_fail "service $2: '$3' never held; last: $(_short "$BODY")"
		return 1
	fi
}

ms() {
	date -d "$1" +%s%3N
}

# lines_at_least FILE N: FILE exists and has at least N lines.
lines_at_least() {
	[[ -e $1 ]] && (($(wc -l <"$1") >= $2))
}

# time_past MS: the wall clock (ms since the epoch) has reached MS.
time_past() {
	(($(date +%s%3N) >= $1))
}

# gaps_at_least MIN: every attempt (after the first) started at least MIN ms after the previous
# one ended, by the recorded times in BODY.
gaps_at_least() {
	local n i prev_end start
	n=$(j '.attempts | length')
	for ((i = 1; i < n; i++)); do
		prev_end=$(ms "$(j ".attempts[$((i - 1))].endedAt")")
		start=$(ms "$(j ".attempts[$i].startedAt")")
		assert_le "$1" $((start - prev_end)) "gap before attempt $((i + 1))" || return 1
	done
}

t_on_failure_exhausted() {
	svc_create "$WS" '{"name":"flaky","command":"echo up; sleep 0.2; exit 1",
		"restart":{"policy":"on-failure","maxRestarts":3,"delayMs":100}}' || return 1
	assert_eq flaky "$(j .name)" name
	svc_wait "$WS" flaky '.state == "exhausted"' || return 1
	assert_eq 4 "$(j '.attempts | length')" "attempts"
	assert_eq '[1,2,3,4]' "$(j '[.attempts[].number]')" "attempt numbers"
	assert_eq '["up\n","up\n","up\n","up\n"]' "$(j '[.attempts[].stdout]')" "stdout of each"
	assert_eq '[1,1,1,1]' "$(j '[.attempts[].exitCode]')" "exit codes"
	assert_eq '["exited","exited","exited","exited"]' "$(j '[.attempts[].endReason]')" \
		"end reasons"
	assert_eq 3 "$(j .restartCount)" restartCount
	assert_eq null "$(j .mainPid)" mainPid
	assert_contains "exited with code 1" "$(j .reason)" reason
	gaps_at_least 100
}

t_budget_reset() {
	# Every attempt runs 1.2 s, past resetAfterMs: the count goes back to 0 after each, so
	# maxRestarts 1 never runs out (it would after the second attempt without the reset).
	svc_create "$WS" '{"name":"resets","command":"echo up; sleep 1.2; exit 1",
		"restart":{"policy":"on-failure","maxRestarts":1,"delayMs":50,"resetAfterMs":1000}}' ||
		return 1
	assert_eq 1000 "$(j .restart.resetAfterMs)" "resetAfterMs echoed"
	svc_wait "$WS" resets '(.attempts | map(select(.endedAt != null)) | length) >= 3' 60 ||
		return 1
	assert_ne exhausted "$(j .state)" "state after 3 crashes of long attempts"
	assert_le "$(j .restartCount)" 1 "restartCount (reset after each long attempt)"
	assert_eq '[1,1,1]' "$(j '[.attempts[] | select(.endedAt != null) | .exitCode][0:3]')" \
		"exit codes"
	api -q DELETE "/v1/workspaces/$WS/services/resets"
	# Control: the same long attempts with the reset off (0) run out after 2 attempts.
	svc_create "$WS" '{"name":"noreset","command":"echo up; sleep 1.2; exit 1",
		"restart":{"policy":"on-failure","maxRestarts":1,"delayMs":50,"resetAfterMs":0}}' ||
		return 1
	svc_wait "$WS" noreset '.state == "exhausted"' 30 || return 1
	assert_eq 2 "$(j '.attempts | length')" "attempts without the reset"
	api -q DELETE "/v1/workspaces/$WS/services/noreset"
	# Positive control: a fast crash loop with the same budget is exhausted after 2 attempts.
	svc_create "$WS" '{"name":"crashloop","command":"echo up; exit 1",
		"restart":{"policy":"on-failure","maxRestarts":1,"delayMs":50,"resetAfterMs":30000}}' ||
		return 1
	svc_wait "$WS" crashloop '.state == "exhausted"' 30 || return 1
	assert_eq 2 "$(j '.attempts | length')" "attempts of the crash loop"
	assert_eq 1 "$(j .restartCount)" "restartCount of the crash loop"
	api -q DELETE "/v1/workspaces/$WS/services/crashloop"
	# The default is 60 s.
	svc_create "$WS" '{"name":"defaults","command":"exit 0"}' || return 1
	assert_eq 60000 "$(j .restart.resetAfterMs)" "default resetAfterMs"
	api -q DELETE "/v1/workspaces/$WS/services/defaults"
}

t_always_restarts_after_exit_0() {
	svc_create "$WS" '{"name":"always","command":"echo ok",
		"restart":{"policy":"always","maxRestarts":2,"delayMs":400}}' || return 1
	svc_wait "$WS" always '.state == "exhausted"' || return 1
	assert_eq 3 "$(j '.attempts | length')" attempts
	assert_eq '[0,0,0]' "$(j '[.attempts[].exitCode]')" "exit codes"
	assert_eq '["ok\n","ok\n","ok\n"]' "$(j '[.attempts[].stdout]')" stdout
	gaps_at_least 400
}

t_backoff() {
	svc_create "$WS" '{"name":"backoff","command":"exit 1","restart":{"policy":"on-failure",
		"maxRestarts":3,"delayMs":100,"backoff":{"multiplier":3,"maxDelayMs":500}}}' || return 1
	svc_wait "$WS" backoff '.state == "exhausted"' || return 1
	assert_eq 4 "$(j '.attempts | length')" attempts
	assert_eq 3 "$(j .restart.backoff.multiplier)" multiplier
	# Delays 100, 300, then 900 capped at 500.
	local e1 s2 e2 s3 e3 s4
	e1=$(ms "$(j '.attempts[0].endedAt')") s2=$(ms "$(j '.attempts[1].startedAt')")
	e2=$(ms "$(j '.attempts[1].endedAt')") s3=$(ms "$(j '.attempts[2].startedAt')")
	e3=$(ms "$(j '.attempts[2].endedAt')") s4=$(ms "$(j '.attempts[3].startedAt')")
	assert_le 100 $((s2 - e1)) "first delay"
	assert_le 300 $((s3 - e2)) "second delay"
	assert_le 500 $((s4 - e3)) "third delay (capped)"
	assert_le $((s4 - e3)) 850 "third delay is the cap, not 900"
}

t_no_never_restarts() {
	svc_create "$WS" '{"name":"once-ok","command":"echo fine","restart":{"policy":"no"}}' ||
		return 1
	svc_create "$WS" '{"name":"once-bad","command":"exit 3"}' || return 1
	assert_eq no "$(j .restart.policy)" "default policy"
	svc_create "$WS" '{"name":"onfail-ok","command":"exit 0",
		"restart":{"policy":"on-failure","delayMs":0}}' || return 1
	svc_wait "$WS" once-ok '.state == "stopped"' || return 1
	assert_eq 1 "$(j '.attempts | length')" "attempts of once-ok"
	assert_eq 0 "$(j '.attempts[0].exitCode')" "exit code of once-ok"
	svc_wait "$WS" once-bad '.state == "failed"' || return 1
	assert_eq 1 "$(j '.attempts | length')" "attempts of once-bad"
	assert_eq "exited with code 3" "$(j .reason)" "reason of once-bad"
	svc_wait "$WS" onfail-ok '.state == "stopped"' || return 1
	assert_eq 1 "$(j '.attempts | length')" "on-failure does not restart exit 0"
	assert_eq null "$(j .nextRestartAt)" nextRestartAt
}

t_stop_signal_then_kill() {
	local t0
	rm -f "$WORKDIR/trap-ready"
	svc_create "$WS" '{"name":"stubborn","stopTimeoutMs":700,
		"command":"trap \"echo got-term\" TERM; touch trap-ready; while :; do sleep 0.1; done",
		"restart":{"policy":"always","maxRestarts":5,"delayMs":100}}' || return 1
	wait_for -t 10 test -e "$WORKDIR/trap-ready" || _fail "the service never became ready"
	svc_wait "$WS" stubborn '.state == "running"' || return 1
	t0=$(date +%s%3N)
	api -q POST "/v1/workspaces/$WS/services/stubborn/stop"
	assert_status 200 "stop" || return 1
	# The answer comes once the service is stopped, with the stopped attempt in it.
	assert_eq stopped "$(j .state)" "state in the stop's answer"
	assert_eq false "$(j .stopping)" "no longer stopping in the stop's answer"
	assert_eq 1 "$(j '.attempts | length')" attempts
	assert_eq stopped "$(j '.attempts[0].endReason')" endReason
	assert_eq 9 "$(j '.attempts[0].signal')" "SIGKILL after the timeout"
	assert_contains got-term "$(j '.attempts[0].stdout')" "the TERM reached the trap"
	assert_le 700 $(($(ms "$(j '.attempts[0].endedAt')") - t0)) "stop waited stopTimeoutMs"
	assert_eq "stopped on request" "$(j .reason)" reason
	assert_eq null "$(j .nextRestartAt)" "no restart pending"
	# The policy would restart after 100 ms: wait well past that, nothing may start.
	sleep 0.5
	svc_get "$WS" stubborn
	assert_eq stopped "$(j .state)" "still stopped"
	assert_eq 1 "$(j '.attempts | length')" "still one attempt"
	no_process 'trap-ready' || _fail "processes of the stopped service remain"
}

t_stop_signal_honoured() {
	svc_create "$WS" '{"name":"int","command":"exec sleep 1000.71","stopSignal":"SIGINT",
		"restart":{"policy":"always","delayMs":100}}' || return 1
	assert_eq SIGINT "$(j .stopSignal)" stopSignal
	svc_wait "$WS" int '.state == "running"' || return 1
	wait_for -t 5 pgrep -f 'sleep 1000.71' >/dev/null || _fail "never started"
	api -q POST "/v1/workspaces/$WS/services/int/stop"
	assert_eq stopped "$(j .state)" "state in the stop's answer"
	assert_eq 2 "$(j '.attempts[0].signal')" "ended by SIGINT"
	assert_eq 1 "$(j '.attempts | length')" attempts
	wait_for -t 5 no_process 'sleep 1000.71' || _fail "sleep survived"
}

t_stop_during_backoff() {
	local next
	svc_create "$WS" '{"name":"pending","command":"exit 1",
		"restart":{"policy":"on-failure","maxRestarts":5,"delayMs":5000}}' || return 1
	svc_wait "$WS" pending '.state == "backoff"' || return 1
	next=$(ms "$(j .nextRestartAt)")
	assert_eq 1 "$(j '.attempts | length')" "first attempt done"
	api -q POST "/v1/workspaces/$WS/services/pending/stop"
	assert_status 200 stop || return 1
	assert_eq stopped "$(j .state)" "state in the stop's answer"
	assert_eq null "$(j .nextRestartAt)" nextRestartAt
	# Wait until the cancelled restart would have happened, and a little more.
	wait_for -t 20 time_past $((next + 500))
	svc_get "$WS" pending
	assert_eq stopped "$(j .state)" "still stopped after the restart time"
	assert_eq 1 "$(j '.attempts | length')" "no restart happened"
}

t_restart() {
	local pid1
	svc_create "$WS" '{"name":"restartable","command":"echo hello; exec sleep 1000.72",
		"restart":{"policy":"no"}}' || return 1
	svc_wait "$WS" restartable '.state == "running" and .mainPid != null' || return 1
	pid1=$(j .mainPid)
	# The shell has echoed once it has become the sleep.
	wait_for -t 10 pgrep -f -- '^sleep 1000.72' >/dev/null || _fail "the service never reached its sleep"
	assert_eq 1 "$(j .currentAttempt)" currentAttempt
	api -q POST "/v1/workspaces/$WS/services/restartable/restart"
	assert_status 200 restart || return 1
	svc_wait "$WS" restartable '.state == "running" and .currentAttempt == 2' || return 1
	assert_ne "$pid1" "$(j .mainPid)" "a new main process"
	assert_eq '[[1,"ended"],[2,"running"]]' "$(j '[.attempts[] | [.number, .state]]')" \
		"one finished attempt, then the running one"
	assert_eq restarted "$(j '.attempts[0].endReason')" endReason
	assert_eq 15 "$(j '.attempts[0].signal')" "ended by SIGTERM"
	assert_eq '"hello\n"' "$(j '.attempts[0].stdout | tojson')" stdout
	assert_eq 1 "$(process_count 'sleep 1000.72')" "one sleep runs"
	# A stopped service restarts too.
	api -q POST "/v1/workspaces/$WS/services/restartable/stop"
	assert_eq stopped "$(j .state)" "state in the stop's answer"
	api -q POST "/v1/workspaces/$WS/services/restartable/restart"
	assert_status 200 "restart a stopped service" || return 1
	svc_wait "$WS" restartable '.state == "running" and .currentAttempt == 3' || return 1
	api -q DELETE "/v1/workspaces/$WS/services/restartable"
	assert_status 200 delete
	assert_eq true "$(j .deleted)" deleted
	wait_for -t 5 no_process 'sleep 1000.72' || _fail "delete left the process"
	svc_get "$WS" restartable
	assert_status 404 "deleted service"
}

t_daemonize() {
	svc_create "$WS" '{"name":"daemon","command":"sleep 1000.73 & echo forked"}' || return 1
	svc_wait "$WS" daemon '.state == "failed"' || return 1
	assert_eq true "$(j '.attempts[0].daemonized')" daemonized
	assert_eq daemonized "$(j '.attempts[0].endReason')" endReason
	assert_eq "the main process exited while 1 process was still running; services must run in the foreground" \
		"$(j '.attempts[0].reason')" "attempt reason"
	assert_contains "services must run in the foreground" "$(j .reason)" "service reason"
	assert_eq '"forked\n"' "$(j '.attempts[0].stdout | tojson')" stdout
	wait_for -t 5 no_process 'sleep 1000.73' || _fail "the daemonized process was left running"
	# Positive control: a foreground service is not flagged.
	svc_get "$WS" once-ok
	assert_eq false "$(j '.attempts[0].daemonized')" "foreground service not daemonized"
}

t_controller_sigkill() {
	local agent
	rm -f "$WORKDIR/away.log"
	agent=$(agent_pid "$WS")
	svc_create "$WS" '{"name":"away","command":"echo up; echo x >> away.log; sleep 0.3; exit 1",
		"restart":{"policy":"on-failure","maxRestarts":6,"delayMs":200}}' || return 1
	wait_for -t 10 test -s "$WORKDIR/away.log" || _fail "never started"
	stop_controller KILL
	assert_eq 137 "$CONTROLLER_EXIT" "controller killed"
	# Supervision goes on: all 7 attempts start while no controller runs.
	wait_for -t 20 lines_at_least "$WORKDIR/away.log" 7 ||
		_fail "attempts did not go on without the controller: $(wc -l <"$WORKDIR/away.log")"
	kill -0 "$agent" 2>/dev/null || _fail "the agent died with the controller"
	restart_controller || return 1
	svc_wait "$WS" away '.state == "exhausted"' 20 || return 1
	assert_eq 7 "$(j '.attempts | length')" "every attempt recorded"
	assert_eq '[1,2,3,4,5,6,7]' "$(j '[.attempts[].number]')" "each attempt once"
	assert_eq 7 "$(j '[.attempts[] | select(.stdout == "up\n" and .exitCode == 1)] | length')" \
		"each with its output and exit code"
	assert_eq 7 "$(wc -l <"$WORKDIR/away.log")" "no attempt after exhaustion"
	api -q GET "/v1/workspaces/$WS/services"
	assert_eq 1 "$(j '[.services[] | select(.name == "away")] | length')" "listed once"
}

t_outputs_kept_while_away() {
	rm -f "$WORKDIR/gate" "$WORKDIR/many.log"
	svc_create "$WS" '{"name":"many","command":"while [ ! -e gate ]; do sleep 0.05; done; echo up; echo x >> many.log",
		"restart":{"policy":"always","maxRestarts":25,"delayMs":0}}' || return 1
	svc_wait "$WS" many '.state == "running"' || return 1
	stop_controller KILL
	touch "$WORKDIR/gate"
	wait_for -t 30 lines_at_least "$WORKDIR/many.log" 26 ||
		_fail "26 attempts did not run: $(wc -l <"$WORKDIR/many.log")"
	restart_controller || return 1
	svc_wait "$WS" many '.state == "exhausted"' 20 || return 1
	assert_eq 26 "$(j '.attempts | length')" "every attempt recorded"
	assert_eq '[1,2,3,4,5,6]' "$(j '[.attempts[] | select(.outputDropped) | .number]')" \
		"the oldest 6 lost their output"
	assert_eq 20 "$(j '[.attempts[] | select(.stdout == "up\n")] | length')" \
		"the newest 20 kept it"
	assert_eq '[""]' "$(j '[.attempts[] | select(.outputDropped) | .stdout] | unique')" \
		"dropped output is empty"
	assert_eq '[3]' "$(j '[.attempts[].stdoutBytes] | unique')" "byte counts kept for all"
}

t_workspace_restart() {
	local ws
	new_ws ws || return 1
	svc_create "$ws" '{"name":"auto","command":"echo auto; exec sleep 1000.74","autostart":true}' ||
		return 1
	svc_create "$ws" '{"name":"manual","command":"exec sleep 1000.75"}' || return 1
	svc_wait "$ws" auto '.state == "running"' || return 1
	svc_wait "$ws" manual '.state == "running"' || return 1
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 "workspace restart" || return 1
	svc_wait "$ws" auto '.state == "running" and .currentAttempt == 2' || return 1
	assert_eq true "$(j .autostart)" autostart
	assert_eq lost "$(j '.attempts[0].endReason')" "the first attempt was lost"
	assert_eq "workspace restarted" "$(j '.attempts[0].reason')" "lost reason"
	svc_wait "$ws" manual '.state == "stopped"' || return 1
	assert_eq "workspace restarted" "$(j .reason)" "manual's reason"
	assert_eq 1 "$(j '.attempts | length')" "manual did not start again"
	assert_eq 1 "$(process_count 'sleep 1000.74')" "auto runs once"
	assert_eq 0 "$(process_count 'sleep 1000.75')" "manual runs no more"
	# Numbers go on after the restart.
	api -q POST "/v1/workspaces/$ws/services/manual/restart"
	svc_wait "$ws" manual '.state == "running" and .currentAttempt == 2' || return 1
}

t_logs_follow() {
	local out=$TMP/logs.out pid
	rm -f "$WORKDIR/go-on"
	svc_create "$WS" '{"name":"chatty",
		"command":"echo line1; while [ ! -e go-on ]; do sleep 0.05; done; echo line2; echo err >&2"}' ||
		return 1
	svc_wait "$WS" chatty '.state == "running"' || return 1
	cli service logs -f "$WS" chatty >"$out" 2>"$out.err" &
	pid=$!
	wait_for -t 10 grep -q line1 "$out" || _fail "line1 not shown: $(cat "$out" "$out.err")"
	kill -0 "$pid" 2>/dev/null || _fail "logs -f ended while the attempt runs"
	grep -q line2 "$out" && _fail "line2 before it was written"
	touch "$WORKDIR/go-on"
	wait_for -t 10 grep -q line2 "$out" || _fail "line2 not shown live"
	wait_for -t 10 _pid_gone "$pid" || _fail "logs -f did not end with the attempt"
	wait "$pid"
	assert_eq 0 "$?" "logs -f exit status"
	assert_eq $'line1\nline2' "$(cat "$out")" "stdout followed"
	assert_eq err "$(cat "$out.err")" "stderr followed"
	# Without -f: the last finished attempt.
	assert_eq $'line1\nline2' "$(cli service logs "$WS" chatty 2>/dev/null)" "logs after the end"
	# The API stream: output events, then end with the service.
	api -q GET "/v1/workspaces/$WS/services/chatty/logs"
	assert_status 200 "logs over SSE"
	assert_contains 'event: output' "$BODY" "output event"
	assert_contains 'event: end' "$BODY" "end event"
}

t_duplicate_name() {
	svc_create "$WS" '{"name":"dup","command":"exec sleep 1000.76"}' || return 1
	api -q POST "/v1/workspaces/$WS/services" '{"name":"dup","command":"true"}'
	assert_status 409 "duplicate name"
	assert_eq conflict "$(j .error.code)" "error code"
	assert_eq name "$(j .error.field)" "error field"
	api -q DELETE "/v1/workspaces/$WS/services/dup"
	assert_status 200 "delete dup"
	wait_for -t 5 no_process 'sleep 1000.76' || _fail "dup's process left"
	svc_create "$WS" '{"name":"dup","command":"true"}' || return 1
}

# bad_input FIELD JSON: POST is refused with 400 naming FIELD.
bad_input() {
	api -q POST "/v1/workspaces/$WS/services" "$2"
	assert_status 400 "bad $1: $2" || return 1
	assert_eq "$1" "$(j .error.field)" "field named for $2"
}

t_bad_inputs() {
	bad_input name '{"command":"true"}'
	bad_input name '{"name":"Web","command":"true"}'
	bad_input name '{"name":"-web","command":"true"}'
	bad_input name '{"name":"a234567890123456789012345678901234567890123456789012345678901234","command":"true"}'
	bad_input command '{"name":"x"}'
	bad_input command '{"name":"x","command":""}'
	bad_input restart '{"name":"x","command":"true","restart":"always"}'
	bad_input restart.policy '{"name":"x","command":"true","restart":{"policy":"sometimes"}}'
	bad_input restart.maxRestarts '{"name":"x","command":"true","restart":{"maxRestarts":-1}}'
	bad_input restart.delayMs '{"name":"x","command":"true","restart":{"delayMs":"1s"}}'
	bad_input restart.color '{"name":"x","command":"true","restart":{"color":1}}'
	bad_input restart.resetAfterMs '{"name":"x","command":"true","restart":{"resetAfterMs":-1}}'
	bad_input restart.resetAfterMs \
		'{"name":"x","command":"true","restart":{"resetAfterMs":86400001}}'
	bad_input restart.backoff.multiplier \
		'{"name":"x","command":"true","restart":{"backoff":{"multiplier":0.5}}}'
	bad_input stopSignal '{"name":"x","command":"true","stopSignal":"SIGFOO"}'
	bad_input stopSignal '{"name":"x","command":"true","stopSignal":99}'
	bad_input stopTimeoutMs '{"name":"x","command":"true","stopTimeoutMs":99999999}'
	bad_input autostart '{"name":"x","command":"true","autostart":"yes"}'
	bad_input env '{"name":"x","command":"true","env":{"1A":"b"}}'
	bad_input foo '{"name":"x","command":"true","foo":1}'
	svc_get "$WS" x
	assert_status 404 "nothing was created"
	svc_get "$WS" nope
	assert_status 404 "unknown service"
	api -q POST "/v1/workspaces/$WS/services/nope/stop"
	assert_status 404 "stop an unknown service"
}

t_cli() {
	local out
	out=$(cli service start --restart on-failure --max-restarts 1 --delay-ms 100 "$WS" \
		cli-svc -- 'echo from-cli; exit 2' 2>&1)
	assert_eq 0 "$?" "service start exit status" || diag "$out"
	assert_match '^cli-svc (starting|running)' "$out" "start line"
	svc_wait "$WS" cli-svc '.state == "exhausted"' || return 1
	out=$(cli service ls "$WS")
	assert_match 'cli-svc +exhausted +1 ' "$out" "ls row"
	out=$(cli service show --json "$WS" cli-svc)
	assert_eq 2 "$(j '.attempts | length' "$out")" "show --json attempts"
	assert_eq '"from-cli\n"' "$(j '.attempts[1].stdout | tojson' "$out")" "show --json output"
	out=$(cli service show "$WS" cli-svc)
	assert_match 'exhausted' "$out" "show line"
	assert_match $'\n2 +exited +2 ' "$out" "show attempt row"
	cli service start "$WS" cli-svc -- true >/dev/null 2>&1
	assert_eq 1 "$?" "duplicate start fails"
	cli service stop "$WS" nope >/dev/null 2>&1
	assert_eq 1 "$?" "stop of an unknown service fails"
	out=$(cli service rm "$WS" cli-svc)
	assert_eq "cli-svc deleted" "$out" "rm"
}

t_running_attempt() {
	check_running_counts "$WS"
}

run_test "the running attempt is listed with its live byte counts, then replaced by its end" \
	t_running_attempt
run_test "on-failure: exactly 4 attempts with maxRestarts 3, then exhausted" t_on_failure_exhausted
run_test "restart budget resets after an attempt of resetAfterMs; a crash loop still exhausts" \
	t_budget_reset
run_test "always restarts after exit 0; delayMs honoured" t_always_restarts_after_exit_0
run_test "backoff multiplies the delay up to its cap" t_backoff
run_test "no never restarts; on-failure leaves exit 0 alone" t_no_never_restarts
run_test "stop: stopSignal, SIGKILL after stopTimeoutMs, no restart; answers stopped" \
	t_stop_signal_then_kill
run_test "stop sends the configured stopSignal" t_stop_signal_honoured
run_test "stop during backoff cancels the restart" t_stop_during_backoff
run_test "restart makes a fresh attempt" t_restart
run_test "a daemonizing command is reported and its leftovers killed" t_daemonize
run_test "services keep restarting while the controller is SIGKILLed" t_controller_sigkill
run_test "the agent keeps the output of the newest 20 unacknowledged attempts" \
	t_outputs_kept_while_away
run_test "workspace restart: autostart runs again, others stopped" t_workspace_restart
run_test "logs -f shows the current attempt live" t_logs_follow
run_test "duplicate name is 409" t_duplicate_name
run_test "bad inputs are 400 naming the field" t_bad_inputs
run_test "CLI: service start, ls, show, stop, rm" t_cli
