#!/bin/bash
# Lifecycle of a container workspace (issue 3 item 10, DESIGN §10): DELETE removes every mount,
# cgroup, runtime state and directory it made; a controller restart (after SIGKILL) adopts a
# running container — a run in flight completes and is recorded once — while a container that
# died during the downtime comes back `stopped`, its in-flight run `lost` with a reason, and
# `restart` brings it back with HOME intact.
. "$(dirname "$0")/container-lib.sh"

require_container_controller

t_delete_removes_everything() {
	local ws
	new_cws ws '{"cpus":1,"memoryMb":128,"pidsLimit":64}' || return 1
	run_cmd "$ws" 'echo x >/home/node/f; echo y >/usr/f; echo ok' || return 1
	run_start "$ws" "$(json_cmd 'setsid sh -c "sleep 1000.91" & sleep 1000.91')" || return 1
	wait_for -t 5 eval '(( $(process_count "sleep 1000.91") >= 2 ))' ||
		_fail "the command never started"
	assert_present "$ws"
	note "before DELETE: $(cgroup_dirs "$ws" | wc -l) cgroup dirs, $(ws_mounts "$ws" | wc -l) mounts, $(ws_cgroup_procs "$ws" | wc -l) processes"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 DELETE || return 1
	assert_eq deleted "$(j .state)" state
	assert_clean "$ws"
	no_process 'sleep 1000.91' || _fail "left running: $(pgrep -af 'sleep 1000.91' | tr '\n' ';')"
	api -q GET "/v1/workspaces/$ws"
	assert_status 404 "GET after DELETE"
}

# A workspace that was restarted first (a second container, a second upper) leaves nothing
# either.
t_delete_after_restart() {
	local ws
	new_cws ws || return 1
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 restart || return 1
	assert_present "$ws"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 DELETE || return 1
	assert_clean "$ws"
}

# run_count WS RUN: how many times the run is listed.
run_count() {
	api -q GET "/v1/workspaces/$1/commands?limit=1000"
	j "[.commands[] | select(.id == \"$2\")] | length"
}

t_restart_adopts_running() {
	local ws run init
	new_cws ws || return 1
	init=$(container_init_pid "$ws")
	run_start "$ws" "$(json_cmd 'sleep 10.0931; echo done')" || return 1
	run=$RUN
	wait_for -t 5 pgrep -f 'sleep 10.0931' >/dev/null || _fail "the command never started"
	stop_controller KILL
	assert_eq 137 "$CONTROLLER_EXIT" "controller exit status"
	# the container outlives its controller
	kill -0 "$init" 2>/dev/null || _fail "container init $init died with the controller"
	pgrep -f 'sleep 10.0931' >/dev/null || _fail "the run died with the controller"
	restart_controller || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq ready "$(j .state)" "workspace state after the controller restart"
	run_wait "$ws" "$run" 20 || return 1
	assert_eq exited "$(j .status)" "status of the run in flight"
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq '"done\n"' "$(j '.stdout | tojson')" stdout
	assert_eq 1 "$(run_count "$ws" "$run")" "times the run is listed"
	local finished
	finished=$(grep -c "run finished.*run=$run" "$CONTROLLER_LOG")
	assert_eq 1 "$finished" "'run finished' lines for the run in the controller log"
	assert_eq "$init" "$(container_init_pid "$ws")" "container init pid (adopted, not restarted)"
	run_cmd "$ws" 'echo after' || return 1
	assert_eq after "$(j .stdout | tr -d '\n')" "a new command after the adoption"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 DELETE
}

t_container_dies_during_downtime() {
	local ws run init
	new_cws ws || return 1
	run_cmd "$ws" 'echo kept >/home/node/kept.txt' || return 1
	init=$(container_init_pid "$ws")
	assert_match '^[0-9]+$' "$init" "container init pid" || return 1
	assert_eq "$init" "$(agent_pid_of "$ws")" "the agent is the container's init"
	run_start "$ws" "$(json_cmd 'sleep 1000.92')" || return 1
	run=$RUN
	wait_for -t 5 pgrep -f 'sleep 1000.92' >/dev/null || _fail "the command never started"
	stop_controller KILL
	kill -KILL "$init"
	wait_for -t 5 _pid_gone "$init" || _fail "container init $init survived SIGKILL"
	wait_for -t 5 no_process 'sleep 1000.92' || _fail "the run survived its container's init"
	restart_controller || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq stopped "$(j .state)" "workspace state"
	assert_ne null "$(j .reason)" "workspace reason"
	note "workspace reason: $(j .reason)"
	run_get "$ws" "$run"
	assert_eq lost "$(j .status)" "the run in flight"
	assert_ne null "$(j .reason)" "its reason"
	assert_ne '' "$(j .reason)" "its reason"
	note "run reason: $(j .reason)"
	assert_eq 1 "$(run_count "$ws" "$run")" "times the run is listed"
	# the dead container's runtime state and rootfs mount are released; HOME stays
	runtime_knows "$ws"; [[ $? -eq 1 ]] || _fail "the runtime still lists the dead container $ws (or cannot say)"
	ws_mounts "$ws" | grep -q ' - overlay ' && _fail "the dead container's rootfs is still mounted"
	[[ -f $ROOT/workspaces/$ws/home/kept.txt ]] || _fail "HOME lost its file"
	# a new command is refused while stopped
	api -q POST "/v1/workspaces/$ws/commands" "$(json_cmd true)"
	assert_status 409 "command on a stopped workspace"
	# restart brings it back with HOME intact
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 "restart of the stopped workspace" || return 1
	run_cmd "$ws" 'cat /home/node/kept.txt' || return 1
	assert_eq kept "$(j .stdout | tr -d '\n')" "HOME after the restart"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 DELETE
}

# A stopped workspace (its container dead, its runtime state and mount still there) is deleted
# cleanly too.
t_delete_stopped() {
	local ws init
	new_cws ws || return 1
	init=$(container_init_pid "$ws")
	kill -KILL "$init"
	wait_for -t 10 eval "api -q GET /v1/workspaces/$ws; [[ \$(j .state) == stopped ]]" ||
		_fail "workspace not stopped after its init was killed: $(j .state)"
	runtime_knows "$ws"; [[ $? -eq 1 ]] || _fail "the runtime still lists the dead container $ws (or cannot say)"
	ws_mounts "$ws" | grep -q ' - overlay ' && _fail "the dead container's rootfs is still mounted"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 DELETE
	assert_clean "$ws"
}

# agent_pid_of WS: the station-agent process whose cgroup names the workspace.
agent_pid_of() {
	local pid
	for pid in $(pgrep -x station-agent); do
		grep -qF "$1" "/proc/$pid/cgroup" 2>/dev/null && echo "$pid"
	done
}

run_test "DELETE removes mounts, cgroups, runtime state, directory, processes" t_delete_removes_everything
run_test "DELETE after a restart leaves nothing either" t_delete_after_restart
run_test "controller SIGKILL + restart adopts the running container; run recorded once" t_restart_adopts_running
run_test "container killed during the downtime: stopped, run lost, restart keeps HOME" t_container_dies_during_downtime
run_test "a stopped workspace is deleted cleanly" t_delete_stopped
