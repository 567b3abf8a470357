#!/bin/bash
# Safe defaults an operator loosens (DESIGN §13, docs/security.md):
# - a workspace that names no limits gets the worker's default pids and memory limits on its
#   cgroup (host and container), and a fork bomb inside stops there; control: an explicit,
#   larger pidsLimit is the one applied;
# - the host adapter is off unless --adapters enables it; control: enabled, it creates;
# - --host-user: host commands run as that user, who cannot read a root-only host file; control:
#   without it they run as root and read it.
. "$(dirname "$0")/../integration/container-lib.sh"

# The shipped defaults (station-sandboxd's main.c, docs/operations.md).
DEFAULT_PIDS=1024
DEFAULT_MEMORY_MB=2048

require_container_controller

# ws_cgroup_file ID FILE: the path of FILE in the workspace's own cgroup (v1: the hierarchy
# that has FILE; v2: the unified one); empty when there is none.
ws_cgroup_file() {
	find /sys/fs/cgroup/ -mindepth 2 -maxdepth 8 -path "*/$1/$2" 2>/dev/null | head -n 1
}

# ws_pids_max ID, ws_memory_max ID: the limits the kernel holds for the workspace.
ws_pids_max() {
	local f
	f=$(ws_cgroup_file "$1" pids.max)
	[[ -n $f ]] && cat "$f"
}

ws_memory_max() {
	local f
	f=$(ws_cgroup_file "$1" memory.max) # v2
	[[ -n $f ]] || f=$(ws_cgroup_file "$1" memory.limit_in_bytes) # v1
	[[ -n $f ]] && cat "$f"
}

# delete_all: every workspace of this script, through the API of the running controller.
delete_all() {
	local id
	for id in "${WORKSPACES[@]}"; do
		api -q DELETE "/v1/workspaces/$id"
	done
	WORKSPACES=()
}

# switch_controller FLAGS...: a new controller on the same root, with exactly these flags
# (start_controller adds --adapters only when they have none).
switch_controller() {
	delete_all
	stop_controller
	start_controller --worker "$WORKER" --runtime "$RUNTIME" "$@"
}

# --- default limits ---------------------------------------------------------------------------

check_defaults() {
	local ws=$1 what=$2
	api -q GET "/v1/workspaces/$ws"
	assert_eq "$DEFAULT_PIDS" "$(j .pidsLimit)" "$what: pidsLimit in the workspace JSON"
	assert_eq "$DEFAULT_MEMORY_MB" "$(j .memoryMb)" "$what: memoryMb in the workspace JSON"
	assert_eq "$DEFAULT_PIDS" "$(ws_pids_max "$ws")" "$what: pids.max of the workspace cgroup"
	assert_eq $((DEFAULT_MEMORY_MB << 20)) "$(ws_memory_max "$ws")" \
		"$what: memory limit of the workspace cgroup"
}

t_default_limits_container() {
	new_cws CWS || return 1
	check_defaults "$CWS" container
}

t_default_limits_host() {
	new_ws HWS '{"adapter":"host"}' || return 1
	check_defaults "$HWS" host
}

FORK_LOOP='i=0; while :; do sleep 1000.71 & i=$((i + 1)); echo $i; done'

# The fork bomb of a workspace created without limits stops at the default.
t_fork_bomb_stops_at_default() {
	run_cmd "$CWS" "$FORK_LOOP" '.timeoutMs = 60000' || return 1
	local count
	count=$(j .stdout | grep . | tail -n 1)
	note "forks before the default pids limit stopped them: $count (default $DEFAULT_PIDS)"
	assert_eq exited "$(j .status)" "status (the shell gives up when fork fails)"
	assert_contains "can't fork" "$(j .stderr)" stderr
	assert_match '^[0-9]+$' "$count" "fork count" || return 1
	assert_le "$count" $((DEFAULT_PIDS - 1)) "forks that succeeded (below the default)"
	assert_le $((DEFAULT_PIDS - 16)) "$count" "forks that succeeded (up to the default)"
	wait_for -t 20 no_process 'sleep 1000.71' ||
		_fail "sleepers left running: $(process_count 'sleep 1000.71')"
	run_cmd "$CWS" 'echo next' || return 1
	assert_eq next "$(j .stdout | tr -d '\n')" "next command"
}

# Control: an explicit pidsLimit above the default is the one applied, and the same number of
# forks that the default stopped succeeds.
t_explicit_limit_wins() {
	local big=$((DEFAULT_PIDS + 512)) n=$((DEFAULT_PIDS + 100)) ws
	new_cws ws "{\"pidsLimit\":$big,\"memoryMb\":4096}" || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq "$big" "$(j .pidsLimit)" "pidsLimit in the workspace JSON"
	assert_eq 4096 "$(j .memoryMb)" "memoryMb in the workspace JSON"
	assert_eq "$big" "$(ws_pids_max "$ws")" "pids.max of the workspace cgroup"
	assert_eq $((4096 << 20)) "$(ws_memory_max "$ws")" "memory limit of the workspace cgroup"
	run_cmd "$ws" "i=0; while [ \$i -lt $n ]; do sleep 1000.72 & i=\$((i + 1)); done; echo \$i" \
		'.timeoutMs = 60000' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq "$n" "$(j .stdout | tr -d '\n')" "forks under the explicit limit"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete"
	wait_for -t 20 no_process 'sleep 1000.72' || _fail "sleepers left running"
}

# An operator who wants no default says 0; the worker then applies none.
t_operator_opts_out() {
	switch_controller --default-pids-limit 0 --default-memory-mb 0 || return 1
	local ws
	new_ws ws '{"adapter":"host"}' || return 1
	assert_eq 0 "$(j .pidsLimit)" "pidsLimit in the workspace JSON"
	assert_eq max "$(ws_pids_max "$ws")" "pids.max of the workspace cgroup"
	api -q GET /v1/worker
	assert_eq 0 "$(j .limits.defaultPidsLimit)" "worker's defaultPidsLimit"
}

run_test "container workspace without limits gets the default pids and memory limits" \
	t_default_limits_container
run_test "host workspace without limits gets the default pids and memory limits" \
	t_default_limits_host
run_test "fork bomb in a workspace without limits stops at the default pids limit" \
	t_fork_bomb_stops_at_default
run_test "control: an explicit larger pidsLimit is the one applied" t_explicit_limit_wins
run_test "an operator opts out of the default limits with 0" t_operator_opts_out

# --- adapters --------------------------------------------------------------------------------

# The controller as an operator starts it: no --adapters (networking off, as in every test that
# does not test it: the default bridge and its tables would outlive the test).
start_plain_controller() {
	delete_all
	stop_controller
	CONTROLLER_FLAGS=(--adapters container --worker "$WORKER" --runtime "$RUNTIME")
	echo "=== start $(date +%T.%N) (no --adapters)" >>"$CONTROLLER_LOG"
	"$DAEMON" --root "$ROOT" --worker "$WORKER" --log-format text --runtime "$RUNTIME" \
		--network-range none >>"$CONTROLLER_LOG" 2>&1 </dev/null &
	CONTROLLER_PID=$!
	wait_for -t 10 _controller_ready
}

t_host_off_by_default() {
	local ws
	start_plain_controller || return 1
	api -q GET /v1/worker
	assert_eq '["container"]' "$(j .adapters)" "worker's adapters"
	assert_eq container "$(j .defaultAdapter)" "worker's default adapter"
	api -q GET /v1/ready
	assert_eq '["container"]' "$(j .adapters)" "ready's adapters"
	api -q POST /v1/workspaces '{"adapter":"host"}'
	assert_status 400 "host create"
	assert_eq adapter "$(j .error.field)" "error field"
	assert_contains "--adapters host,container" "$(j .error.message)" "error message"
	api -q GET /v1/workspaces
	assert_eq 0 "$(j '.workspaces | length')" "workspaces after the refused create"
	# the allowed adapter still creates
	new_cws ws || return 1
	assert_eq container "$(j .adapter)" adapter
}

t_host_enabled() {
	switch_controller --adapters host,container || return 1
	api -q GET /v1/worker
	assert_eq '["host","container"]' "$(j .adapters)" "worker's adapters"
	local ws
	new_ws ws '{"adapter":"host"}' || return 1
	run_cmd "$ws" 'echo on-host' || return 1
	assert_eq on-host "$(j .stdout | tr -d '\n')" "host command"
}

t_default_must_be_allowed() {
	local out rc
	out=$("$DAEMON" --root "$TMP/other-root" --adapters container --default-adapter host 2>&1)
	rc=$?
	assert_eq 64 "$rc" "exit status"
	assert_contains "--default-adapter host is not among the allowed adapters" "$out" message
	assert_contains "--adapters host,container" "$out" "message says how"
	out=$("$DAEMON" --root "$TMP/other-root" --adapters host,vm 2>&1)
	assert_contains 'unknown adapter "vm"' "$out" "unknown adapter"
}

run_test "without --adapters a host workspace is refused (400, field adapter)" \
	t_host_off_by_default
run_test "control: with --adapters host,container a host workspace is created" t_host_enabled
run_test "a --default-adapter that is not allowed is a startup error" t_default_must_be_allowed

# --- the host user ---------------------------------------------------------------------------

# A root-only file in a directory everyone may search: only its mode keeps others out.
mkdir -p "$TMP/pub"
chmod 0755 "$TMP" "$TMP/pub"
SECRET=$TMP/pub/secret
echo root-only >"$SECRET"
chmod 0600 "$SECRET"

t_host_user() {
	switch_controller --adapters host --host-user nobody || return 1
	local ws
	new_ws ws '{}' || return 1
	run_cmd "$ws" 'id -u; id -g; id -G' || return 1
	assert_eq $'65534\n65534\n65534' "$(j .stdout | sed '/^$/d')" "uid, gid, groups"
	run_cmd "$ws" "cat '$SECRET'" || return 1
	assert_ne 0 "$(j .exitCode)" "exit code reading the root-only file"
	assert_contains "Permission denied" "$(j .stderr)" stderr
	assert_eq "" "$(j .stdout)" stdout
	# HOME and the workspace directory are the user's
	run_cmd "$ws" 'touch "$HOME/a" ./b && stat -c %u "$HOME" . && pwd' || return 1
	assert_eq 0 "$(j .exitCode)" "writing HOME: $(j .stderr)"
	assert_eq $'65534\n65534' "$(j .stdout | head -n 2)" "owners of HOME and the workdir"
	api -q GET /v1/worker
	assert_eq 65534 "$(j .hostUser.uid)" "worker's hostUser"
	# a terminal opens a shell for the user although its passwd entry says nologin
	api -q POST "/v1/workspaces/$ws/terminals" '{"cols":80,"rows":24}'
	assert_status 201 "open a terminal" || return 1
	HOST_TERM="/v1/workspaces/$ws/terminals/$(j .id)"
	wait_for -t 10 terminal_opened || _fail "terminal still starting: $(_short "$BODY")"
	assert_eq /bin/sh "$(j .command)" "terminal's shell (nobody's is nologin)"
	assert_eq running "$(j .state)" "terminal state"
}

terminal_opened() {
	api -q GET "$HOST_TERM"
	[[ $(j .state) != starting ]]
}

t_host_root_control() {
	switch_controller --adapters host || return 1
	local ws
	new_ws ws '{}' || return 1
	run_cmd "$ws" 'id -u' || return 1
	assert_eq 0 "$(j .stdout | tr -d '\n')" uid
	run_cmd "$ws" "cat '$SECRET'" || return 1
	assert_eq 0 "$(j .exitCode)" "exit code reading the root-only file"
	assert_eq root-only "$(j .stdout | tr -d '\n')" stdout
}

run_test "--host-user nobody: host commands run as 65534 and cannot read a root-only file" \
	t_host_user
run_test "control: without --host-user host commands run as root and read it" \
	t_host_root_control
