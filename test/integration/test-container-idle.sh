#!/bin/bash
# Activity and idle (issue 14 item 5, docs/api.md "Activity and idle"): a container workspace
# with idleTimeoutMs is not stopped while a command runs longer than the timeout, and is
# stopped once nothing runs, recording why (stopReason "idle"); the positive control, a
# workspace without the timeout idle just as long, is never stopped. A running service and an
# attached terminal keep a workspace awake too; restart brings a stopped one back with HOME
# kept. lastActivityAt moves with API calls on the workspace, not with looking at it.
# idleTimeoutMs is validated.
. "$(dirname "$0")/container-lib.sh"

require_container_controller

t_validation() {
	local bad
	for bad in 500 -1 '"2000"' 2592000001 1.5; do
		api -q POST /v1/workspaces "$(cws_body "{\"idleTimeoutMs\":$bad}")"
		assert_eq 400 "$STATUS" "idleTimeoutMs $bad refused" || continue
		assert_contains idleTimeoutMs "$(j .error.message)" "the message names the field"
	done
}

run_test "idleTimeoutMs is validated" t_validation

new_cws IDLE '{"idleTimeoutMs":2000}' || exit 1
new_cws FREE || exit 1

state_is() {
	api -q GET "/v1/workspaces/$1"
	[[ $(j .state) == "$2" ]]
}

# hold WS: a running service keeps WS awake whatever the time between our requests (a
# loaded machine may take longer than the timeout between two of them): restarts WS when it
# already idled out, until the service is created on a ready workspace.
# HOLD is the service's name (a new one each time: names are unique per workspace).
HOLD=
HOLDS=0
hold() {
	local i
	for i in 1 2 3 4 5; do
		HOLDS=$((HOLDS + 1))
		HOLD=hold$HOLDS
		api -q GET "/v1/workspaces/$1"
		[[ $(j .state) == stopped ]] && api -q POST "/v1/workspaces/$1/restart"
		api -q POST "/v1/workspaces/$1/services" "{\"name\":\"$HOLD\",\"command\":\"sleep 100000\"}"
		[[ $STATUS == 201 ]] && return 0
	done
	_fail "cannot hold $1 awake: HTTP $STATUS $(_short "$BODY")"
}

release() {
	api -q POST "/v1/workspaces/$1/services/$HOLD/stop"
	assert_status 200 "stop the holding service"
}

t_reports() {
	hold "$IDLE" || return 1
	api -q GET "/v1/workspaces/$IDLE"
	assert_eq 2000 "$(j .idleTimeoutMs)" idleTimeoutMs
	assert_eq ready "$(j .state)" "state with a running service"
	assert_eq null "$(j .stopReason)" "stopReason while ready"
	assert_eq true "$(j .busy)" "busy with a running service"
	release "$IDLE"
	local a1 a2 a3
	run_cmd "$FREE" 'true' || return 1
	api -q GET "/v1/workspaces/$FREE"
	a1=$(j .lastActivityAt)
	assert_match '^20[0-9-]+T' "$a1" lastActivityAt || return 1
	assert_eq false "$(j .busy)" "busy when nothing runs"
	api -q GET "/v1/workspaces/$FREE"
	a2=$(j .lastActivityAt)
	assert_eq "$a1" "$a2" "lastActivityAt after a GET (looking is no activity)"
	run_cmd "$FREE" 'echo hi' || return 1
	local ended
	ended=$(j .endedAt)
	api -q GET "/v1/workspaces/$FREE"
	a3=$(j .lastActivityAt)
	[[ $a3 > $a2 ]] || _fail "lastActivityAt $a3 not after $a2 (a command ran)"
	[[ ! $a3 < $ended ]] || _fail "lastActivityAt $a3 before the command's end $ended"
	assert_eq 0 "$(j .idleTimeoutMs)" "idleTimeoutMs without one"
}

run_test "a workspace reports idleTimeoutMs and lastActivityAt" t_reports

# A sleep of 6 s, three times the timeout: the workspace is not stopped under it (a stop would
# end the run lost), then is stopped after it; the control, idle as long, is not.
t_idle_stop() {
	hold "$IDLE" || return 1
	run_start "$IDLE" "$(json_cmd 'sleep 6; echo slept' '.timeoutMs = 60000')" || return 1
	local run_idle=$RUN
	release "$IDLE"
	run_start "$FREE" "$(json_cmd 'sleep 6; echo slept' '.timeoutMs = 60000')" || return 1
	local run_free=$RUN
	api -q GET "/v1/workspaces/$IDLE"
	assert_eq true "$(j .busy)" "busy while the sleep runs"
	run_wait "$IDLE" "$run_idle" 60 || return 1
	assert_eq exited "$(j .status)" "the sleep under the timeout ran to its end"
	assert_eq slept "$(j .stdout | tr -d '\n')" stdout
	local ended
	ended=$(j .endedAt)
	run_wait "$FREE" "$run_free" 60 || return 1
	assert_eq exited "$(j .status)" "the control's sleep"
	wait_for -t 60 state_is "$IDLE" stopped || {
		_fail "not stopped after the sleep: $(j '{state, reason, busy, lastActivityAt}')"
		return 1
	}
	assert_eq idle "$(j .stopReason)" stopReason
	assert_match '^idle: ' "$(j .reason)" reason
	[[ ! $(j .updatedAt) < $ended ]] || _fail "stopped at $(j .updatedAt), before the sleep ended at $ended"
	assert_eq "" "$(agent_pid "$IDLE")" "no agent left"
	# the control was idle at least as long (its sleep ended before the stop): still ready
	api -q GET "/v1/workspaces/$FREE"
	assert_eq ready "$(j .state)" "control without idleTimeoutMs"
	assert_eq null "$(j .stopReason)" "control's stopReason"
	run_cmd "$FREE" 'echo alive' || return 1
	assert_eq alive "$(j .stdout | tr -d '\n')" "the control still runs commands"
	# a command on the stopped one is refused with the reason
	api -q POST "/v1/workspaces/$IDLE/commands" "$(json_cmd 'true')"
	assert_eq 409 "$STATUS" "command on the stopped workspace"
	assert_contains "idle" "$(j .error.message)" "its error says why"
}

run_test "idle timeout: not under a running sleep, stopped after it" t_idle_stop

t_restart() {
	api -q POST "/v1/workspaces/$IDLE/restart"
	assert_status 200 restart || return 1
	assert_eq ready "$(j .state)" "state after restart"
	assert_eq null "$(j .stopReason)" "stopReason after restart"
}

run_test "restart brings an idle-stopped workspace back" t_restart

# A service keeps the workspace awake; once stopped, the workspace idles out.
t_service_keeps_awake() {
	hold "$IDLE" || return 1
	# four timeouts' worth of time pass: a wait for the control's 8 s sleep
	run_cmd "$FREE" 'sleep 8' '.timeoutMs = 60000' || return 1
	api -q GET "/v1/workspaces/$IDLE"
	assert_eq ready "$(j .state)" "state with a running service, 8 s later"
	assert_eq true "$(j .busy)" busy
	api -q POST "/v1/workspaces/$IDLE/services/$HOLD/stop"
	wait_for -t 60 state_is "$IDLE" stopped || {
		_fail "not stopped after the service stopped: $(j '{state, busy}')"
		return 1
	}
	assert_eq idle "$(j .stopReason)" stopReason
}

run_test "a running service keeps the workspace awake" t_service_keeps_awake

# The CLI's flag, and a host workspace: stopped means its agent and every process of it killed
# through the workspace cgroup, its directory kept.
t_cli_host() {
	local out id
	out=$(cli create --adapter host --idle-timeout-ms 500 2>&1)
	assert_ne 0 "$?" "--idle-timeout-ms 500 refused" || true
	assert_contains idleTimeoutMs "$out" "the error names the field"
	out=$(cli create --adapter host --idle-timeout-ms 1000 --json) || {
		_fail "cli create: $out"
		return 1
	}
	id=$(j .id "$out")
	WORKSPACES+=("$id")
	assert_eq 1000 "$(j .idleTimeoutMs "$out")" "idleTimeoutMs from the CLI"
	wait_for -t 60 state_is "$id" stopped || {
		_fail "host workspace not stopped: $(j '{state, busy}')"
		return 1
	}
	assert_eq idle "$(j .stopReason)" "host workspace stopReason"
	assert_eq "" "$(agent_pid "$id")" "the host workspace's agent is gone"
	api -q POST "/v1/workspaces/$id/restart"
	assert_status 200 "restart of the host workspace"
}

run_test "CLI --idle-timeout-ms; a host workspace idles out" t_cli_host
