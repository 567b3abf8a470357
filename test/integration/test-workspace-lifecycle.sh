#!/bin/bash
# Workspaces: create, list, get, restart (HOME kept, runs lost), delete (directory, cgroups,
# agent and running commands gone).
. "$(dirname "$0")/lib.sh"

require_controller

t_create() {
	local ws
	new_ws ws '{"env":{"FOO":"bar"}}' || return 1
	assert_match '^test-[a-z2-7]{26}$' "$ws" "workspace id"
	assert_eq test "$(j .worker)" worker
	assert_eq host "$(j .adapter)" adapter
	assert_eq ready "$(j .state)" state
	assert_eq null "$(j .reason)" reason
	assert_eq "$ROOT/workspaces/$ws/home" "$(j .home)" home
	assert_eq "$ROOT/workspaces/$ws/home/workspace" "$(j .workdir)" workdir
	assert_eq '{"FOO":"[redacted]"}' "$(j .env)" "env: names shown, values redacted"
	assert_eq '0 2048 1024' "$(j '"\(.cpus) \(.memoryMb) \(.pidsLimit)"')" \
		"limits default to the worker's (cpus unlimited)"
	assert_ne null "$(j .createdAt)" createdAt
	[[ -d $ROOT/workspaces/$ws/home/workspace ]] || _fail "workdir not made"
	local created=$BODY
	api -q GET "/v1/workspaces/$ws"
	assert_status 200 get
	assert_eq "$(j 'del(.updatedAt)' "$created")" "$(j 'del(.updatedAt)')" "GET returns the created workspace"
	api -q GET /v1/workspaces
	assert_status 200 list
	assert_eq 1 "$(jq -r --arg id "$ws" '[.workspaces[] | select(.id == $id)] | length' <<<"$BODY")" \
		"listed once"
	assert_eq '{"FOO":"[redacted]"}' "$(jq -c --arg id "$ws" '.workspaces[] | select(.id == $id) | .env' <<<"$BODY")" \
		"listed with the value redacted"
	# positive control: redacted in what clients see, the value still reaches the command
	run_cmd "$ws" 'printf %s "$FOO"' || return 1
	assert_eq bar "$(j .stdout)" "the command sees FOO's value"
}

t_ids_unique() {
	local a b
	new_ws a || return 1
	new_ws b || return 1
	assert_ne "$a" "$b" "two workspace ids"
}

t_restart() {
	local ws agent
	new_ws ws || return 1
	agent=$(agent_pid "$ws")
	run_cmd "$ws" 'echo kept > "$HOME/marker"' || return 1
	run_start "$ws" "$(json_cmd 'sleep 1000.661')" || return 1
	local run=$RUN
	wait_for -t 5 pgrep -f 'sleep 1000.661' >/dev/null || _fail "command never started"
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 restart || return 1
	assert_eq ready "$(j .state)" "state after restart"
	run_wait "$ws" "$run" 15 || return 1
	assert_eq lost "$(j .status)" "run status"
	assert_eq 'workspace restarted' "$(j .reason)" "run reason"
	wait_for -t 3 no_process 'sleep 1000.661' || _fail "the run's process survived the restart"
	local new_agent
	new_agent=$(agent_pid "$ws")
	assert_match '^[0-9]+$' "$new_agent" "new agent pid"
	assert_ne "$agent" "$new_agent" "a new agent"
	run_cmd "$ws" 'cat "$HOME/marker"' || return 1
	assert_eq '"kept\n"' "$(j '.stdout | tojson')" "HOME kept across restart"
}

t_delete() {
	local ws agent
	new_ws ws || return 1
	agent=$(agent_pid "$ws")
	assert_match '^[0-9]+$' "$agent" "agent pid" || return 1
	run_cmd "$ws" 'echo x > file' || return 1
	run_start "$ws" "$(json_cmd 'sleep 1000.789')" || return 1
	local run=$RUN
	wait_for -t 5 pgrep -f 'sleep 1000.789' >/dev/null || _fail "command never started"
	# Positive controls: the directory and the cgroups are there before.
	[[ -d $ROOT/workspaces/$ws ]] || _fail "workspace directory missing before delete"
	local before
	before=$(cgroup_dirs "$ws")
	[[ -n $before ]] || _fail "no cgroup directory named after $ws before delete"
	diag "cgroups before delete: $(tr "\n" " " <<<"$before")"

	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 delete || return 1
	assert_eq "{\"id\":\"$ws\",\"state\":\"deleted\"}" "$(j '{id, state}')" "delete response"
	[[ ! -e $ROOT/workspaces/$ws ]] || _fail "workspace directory still there"
	assert_eq '' "$(cgroup_dirs "$ws")" "cgroup directories left"
	wait_for -t 3 no_process 'sleep 1000.789' || _fail "running command survived the delete"
	wait_for -t 3 _pid_gone "$agent" || _fail "agent $agent survived the delete"
	api -q GET "/v1/workspaces/$ws"
	assert_status 404 "GET after delete"
	run_get "$ws" "$run"
	assert_status 404 "the run after delete"
	api -q GET /v1/workspaces
	assert_eq 0 "$(jq -r --arg id "$ws" '[.workspaces[] | select(.id == $id)] | length' <<<"$BODY")" \
		"not listed"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 404 "second delete"
}

t_not_ready_is_conflict() {
	local ws agent
	new_ws ws || return 1
	agent=$(agent_pid "$ws")
	kill -KILL "$agent"
	wait_for -t 10 eval '[[ $(api GET "/v1/workspaces/'"$ws"'" | jq -r .state) == stopped ]]' ||
		_fail "workspace not stopped after its agent died"
	api -q POST "/v1/workspaces/$ws/commands" "$(json_cmd true)"
	assert_status 409 "command in a stopped workspace"
	assert_eq conflict "$(j .error.code)" "error code"
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 "restart a stopped workspace" || return 1
	assert_eq ready "$(j .state)" "state after restart"
	run_cmd "$ws" 'echo back' || return 1
	assert_eq '"back\n"' "$(j '.stdout | tojson')" "a command after restart"
}

run_test "create, get, list" t_create
run_test "workspace ids are unique" t_ids_unique
run_test "restart: runs lost, HOME kept, new agent" t_restart
run_test "delete removes directory, cgroups, agent and runs" t_delete
run_test "stopped workspace: 409 for commands, restart brings it back" t_not_ready_is_conflict
