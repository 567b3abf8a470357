#!/bin/bash
# run-all: slow: container workspaces, a controller restart
# Pause and resume (docs/api.md, "Pause and resume"): a counter process stops while its
# workspace is paused and goes on after resume (it counts before: the positive control); a
# run's timeout does not fire during a pause; a command, a terminal and a file write on a
# paused workspace are 409 "paused" (each beside the same request on a ready one) unless it was
# created with autoResume; a file read is answered while paused; idleAction "pause"; a paused
# workspace stays paused across a controller SIGKILL; a host workspace pauses too; a process
# that moved itself next to the agent (into the container's own cgroup) is frozen as well.
. "$(dirname "$0")/container-lib.sh"

require_container_controller

COUNTER='i=0; while :; do i=$((i+1)); echo $i > $HOME/count; done'

# count WS: the counter's last value, read through the agent (works while paused).
count() {
	api -q GET "/v1/workspaces/$1/files?path=count"
	[[ $STATUS == 200 ]] || {
		diag "read count: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	printf '%s' "$BODY" | tr -d '\n'
}

# advances WS: the counter moves within 2 s.
advances() {
	local a b i
	a=$(count "$1") || return 1
	for i in $(seq 20); do
		sleep 0.1
		b=$(count "$1") || return 1
		[[ -n $b && $b != "$a" ]] && return 0
	done
	return 1
}

# still WS: the counter does not move over a second.
still() {
	local a b
	a=$(count "$1") || return 1
	sleep 1
	b=$(count "$1") || return 1
	[[ -n $a && $a == "$b" ]]
}

start_counter() {
	api -q POST "/v1/workspaces/$1/services" "$(jq -nc --arg c "$COUNTER" '{name: "counter", command: $c}')"
	assert_eq 201 "$STATUS" "counter service starts: $(_short "$BODY")" || return 1
	wait_for -t 10 advances "$1"
}

state_is() {
	api -q GET "/v1/workspaces/$1"
	[[ $(j .state) == "$2" ]]
}

t_counter() {
	new_cws W || return 1
	start_counter "$W" || return 1
	advances "$W" || _fail "positive control: the counter does not count before the pause" || return 1
	api -q POST "/v1/workspaces/$W/pause"
	assert_eq 200 "$STATUS" "pause: $(_short "$BODY")" || return 1
	assert_eq paused "$(j .state)" "state" || return 1
	assert_ne null "$(j .pausedAt)" "pausedAt set"
	still "$W" || _fail "the counter counted while paused" || return 1
	api -q POST "/v1/workspaces/$W/pause"
	assert_eq 200 "$STATUS" "pausing a paused workspace is nothing to do"
	api -q POST "/v1/workspaces/$W/resume"
	assert_eq 200 "$STATUS" "resume: $(_short "$BODY")" || return 1
	assert_eq ready "$(j .state)" "state after resume"
	assert_eq null "$(j .pausedAt)" "pausedAt cleared"
	advances "$W" || _fail "the counter does not count after resume"
}
run_test "a counter stops while paused and goes on after resume" t_counter

t_denials() {
	local wait
	# positive controls: the same requests on the ready workspace
	run_cmd "$W" 'echo hi'
	assert_eq exited "$(j .status)" "a command on the ready workspace runs" || return 1
	api -q PUT "/v1/workspaces/$W/files?path=f1" 'one'
	assert_eq 200 "$STATUS" "a file write on the ready workspace: $(_short "$BODY")" || return 1
	api -q POST "/v1/workspaces/$W/terminals" '{}'
	assert_eq 201 "$STATUS" "a terminal on the ready workspace" || return 1
	api -q POST "/v1/workspaces/$W/pause"
	assert_eq paused "$(j .state)" || return 1
	api -q POST "/v1/workspaces/$W/commands" "$(json_cmd 'echo hi')"
	assert_eq 409 "$STATUS" "a command on the paused workspace" || return 1
	assert_eq paused "$(j .error.code)" "its code"
	api -q PUT "/v1/workspaces/$W/files?path=f2" 'two'
	assert_eq 409 "$STATUS" "a file write on the paused workspace"
	assert_eq paused "$(j .error.code)" "its code"
	api -q POST "/v1/workspaces/$W/terminals" '{}'
	assert_eq 409 "$STATUS" "a terminal on the paused workspace"
	assert_eq paused "$(j .error.code)" "its code"
	api -q POST "/v1/workspaces/$W/services" '{"name":"s2","command":"sleep 100"}'
	assert_eq 409 "$STATUS" "a service start on the paused workspace"
	api -q GET "/v1/workspaces/$W/files?path=f1"
	assert_eq 200 "$STATUS" "a file read on the paused workspace is answered"
	assert_eq one "$BODY" "what it read"
	api -q POST "/v1/workspaces/$W/resume"
	assert_eq ready "$(j .state)"
}
run_test "a paused workspace refuses commands, terminals and writes with 409 paused" t_denials

t_timeout() {
	local t0 t1 ended
	run_start "$W" "$(json_cmd 'sleep 30' '.timeoutMs=2000')" || return 1
	local run=$RUN
	api -q POST "/v1/workspaces/$W/pause"
	assert_eq paused "$(j .state)" || return 1
	sleep 4
	run_get "$W" "$run"
	assert_eq running "$(j .status)" "the run has not timed out during the pause" || return 1
	t0=$(date +%s%3N)
	api -q POST "/v1/workspaces/$W/resume"
	assert_eq ready "$(j .state)" || return 1
	run_get "$W" "$run"
	assert_eq running "$(j .status)" "still running right after resume" || return 1
	run_wait "$W" "$run" 30 || return 1
	t1=$(date +%s%3N)
	assert_eq timed_out "$(j .status)" "it times out after resume"
	ended=$(j .endedAt)
	# about 2 s minus what ran before the pause: at least 1 s after resume
	assert_le 1000 $((t1 - t0)) "it timed out $((t1 - t0)) ms after resume"
	note "run ended at $ended, $((t1 - t0)) ms after resume"
}
run_test "a run's timeout does not fire during a pause and does after" t_timeout

t_auto_resume() {
	new_cws A '{"autoResume":true}' || return 1
	api -q GET "/v1/workspaces/$A"
	assert_eq true "$(j .autoResume)" "autoResume shown"
	api -q POST "/v1/workspaces/$A/pause"
	assert_eq paused "$(j .state)" || return 1
	run_cmd "$A" 'echo woke'
	assert_eq exited "$(j .status)" "the command ran: $(_short "$BODY")"
	assert_eq woke "$(j .stdout | tr -d '\n')"
	state_is "$A" ready || _fail "not resumed: $(j .state)"
}
run_test "autoResume: a command resumes a paused workspace" t_auto_resume

t_validation() {
	api -q POST /v1/workspaces "$(cws_body '{"autoResume":"yes"}')"
	assert_eq 400 "$STATUS" "autoResume a string"
	assert_contains autoResume "$(j .error.message)"
	api -q POST /v1/workspaces "$(cws_body '{"idleAction":"sleep"}')"
	assert_eq 400 "$STATUS" "idleAction sleep"
	assert_eq idleAction "$(j .error.field)"
}
run_test "autoResume and idleAction are validated" t_validation

t_idle() {
	new_cws I '{"idleTimeoutMs":1000,"idleAction":"pause"}' || return 1
	wait_for -t 20 state_is "$I" paused || _fail "not paused when idle: $(j '{state,reason}')" || return 1
	assert_eq idle "$(j .pauseReason)" "pauseReason"
	assert_eq pause "$(j .idleAction)" "idleAction"
	api -q POST "/v1/workspaces/$I/resume"
	assert_eq ready "$(j .state)"
}
run_test "idleAction pause pauses an idle workspace" t_idle

t_restart() {
	api -q POST "/v1/workspaces/$W/pause"
	assert_eq paused "$(j .state)" || return 1
	still "$W" || _fail "counting before the SIGKILL" || return 1
	stop_controller KILL
	restart_controller || return 1
	state_is "$W" paused || _fail "state after restart: $(j .state)" || return 1
	still "$W" || _fail "the counter counts after the controller restart" || return 1
	api -q POST "/v1/workspaces/$W/resume"
	assert_eq ready "$(j .state)" || return 1
	advances "$W" || _fail "the counter does not count after resume"
}
run_test "a paused workspace stays paused across a controller SIGKILL" t_restart

t_hostile() {
	# container root moves a counter of its own into W/c, beside the agent
	run_start "$W" "$(json_cmd 'sh -c '"'"'echo $$ > /run/station/cgroup/0/cgroup.procs 2>/dev/null; for d in /run/station/cgroup/*; do echo $$ > $d/cgroup.procs; done; i=0; while :; do i=$((i+1)); echo $i > $HOME/count2; done'"'"' &')" 10000 || return 1
	api -q GET "/v1/workspaces/$W/files?path=count2"
	local a=$BODY
	sleep 0.5
	api -q GET "/v1/workspaces/$W/files?path=count2"
	assert_ne "$a" "$BODY" "positive control: the mover counts before" || return 1
	api -q POST "/v1/workspaces/$W/pause"
	assert_eq paused "$(j .state)" || return 1
	api -q GET "/v1/workspaces/$W/files?path=count2"
	a=$BODY
	sleep 1
	api -q GET "/v1/workspaces/$W/files?path=count2"
	assert_eq "$a" "$BODY" "the process in the agent's own group counted while paused"
	api -q POST "/v1/workspaces/$W/resume"
}
run_test "a process that moved itself beside the agent is frozen too" t_hostile

t_host() {
	new_ws H '{"adapter":"host"}' || return 1
	start_counter "$H" || return 1
	api -q POST "/v1/workspaces/$H/pause"
	assert_eq paused "$(j .state)" "host pause: $(_short "$BODY")" || return 1
	still "$H" || _fail "the host counter counted while paused" || return 1
	api -q POST "/v1/workspaces/$H/resume"
	assert_eq ready "$(j .state)" || return 1
	advances "$H" || _fail "the host counter does not count after resume"
	api -q POST "/v1/workspaces/$H/pause"
	api -q DELETE "/v1/workspaces/$H"
	assert_eq 200 "$STATUS" "a paused workspace deletes: $(_short "$BODY")"
}
run_test "a host workspace pauses and resumes" t_host
