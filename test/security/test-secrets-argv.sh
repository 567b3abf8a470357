#!/bin/bash
# Attack: read a workspace's env (API keys, in practice) from the host. Every host user can read
# every process's command line in /proc/<pid>/cmdline, and the container's PID 1 (the agent) is
# a host process too; the bundle's config.json holds the agent's arguments. Nothing from the
# workspace's env may be on any host process's command line or in config.json: the agent gets
# it in its start block, through the secret fd (docs/agent-protocol.md, "Start").
#
# Each workspace carries a unique marker in its env; the test scans every /proc/*/cmdline and
# the bundle. Positive controls: the value reaches commands inside the workspace, and the
# scanner finds the marker in a `sleep` this test starts with the marker in its argv.
#
# Runtimes: the controller's (STATION_TEST_RUNTIME, default runc), then crun and runsc when
# installed. Env of more than a pipe's buffer (64 KiB) goes through as well.
. "$(dirname "$0")/../integration/container-lib.sh"

# Unique per run; never passed on a command line by this script (bodies are written with
# bash's printf, the scanner is bash builtins only).
MARK=sk-argv-$$-$RANDOM$RANDOM$RANDOM
BIG=$(printf '%030000d' 0)

# cmdline_pids: pids of host processes whose command line contains MARK.
cmdline_pids() {
	local f arg
	for f in /proc/[0-9]*/cmdline; do
		while IFS= read -r -d '' arg || [[ -n $arg ]]; do
			if [[ $arg == *"$MARK"* ]]; then
				f=${f#/proc/}
				echo "${f%/cmdline}"
				break
			fi
		done 2>/dev/null <"$f"
	done
}

# files_with_mark DIR...: regular files under DIR holding MARK.
files_with_mark() {
	local f
	while IFS= read -r -d '' f; do
		[[ $(<"$f") == *"$MARK"* ]] && echo "$f"
	done < <(find "$@" -type f -size -8M -print0 2>/dev/null)
}

# ws_env_body ADAPTER-FIELDS: a create body with KEY=<marker> and nine entries of 30000 bytes
# (270 KB in all, over a pipe's 64 KiB), written without putting the marker on an argv.
ws_env_body() {
	local i big=
	for i in 1 2 3 4 5 6 7 8 9; do
		big+=",\"BIG_$i\":\"$BIG\""
	done
	printf '{%s"env":{"API_KEY":"%s"%s}}' "$1" "$MARK" "$big"
}

assert_no_cmdline() {
	local pids pid
	pids=$(cmdline_pids)
	for pid in $pids; do
		_fail "$1: the marker is on the command line of pid $pid:" \
			"$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)"
	done
	[[ -z $pids ]]
}

# check_inside WS WORKDIR: the env reaches commands (the marker, the big entries) and the
# workdir is the one expected.
check_inside() {
	run_cmd "$1" 'echo "$API_KEY"; echo ${#BIG_1} ${#BIG_9}; pwd' || return 1
	assert_eq exited "$(j .status)" "status"
	assert_eq "$MARK"$'\n'"30000 30000"$'\n'"$2" "$(j .stdout)" \
		"API_KEY, BIG sizes and workdir inside"
}

t_scanner_control() {
	(exec -a "$MARK" sleep 1000) &
	local pid=$!
	wait_for -t 5 eval '[[ $(cmdline_pids) == *"$pid"* ]]' ||
		_fail "the scanner did not find pid $pid, started with the marker in its argv"
	kill "$pid"
	wait "$pid" 2>/dev/null
	wait_for -t 5 eval '[[ -z $(cmdline_pids) ]]' || _fail "the marker stayed after the kill"
}

t_host() {
	local ws
	new_ws ws "$(ws_env_body '')" || return 1
	check_inside "$ws" "$ROOT/workspaces/$ws/home/workspace"
	assert_no_cmdline "host workspace"
	[[ -n $(agent_pid "$ws") ]] || _fail "no host agent found for $ws (the scan saw nothing)"
}

# check_container: a container workspace on the running controller's runtime.
check_container() {
	local ws cfg
	new_ws ws "$(ws_env_body "\"adapter\":\"container\",\"image\":\"$IMAGE\",")" || return 1
	check_inside "$ws" /home/node/workspace
	run_cmd "$ws" 'echo "$PATH"' || return 1
	assert_eq /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		"$(j .stdout | tr -d '\n')" "the image's PATH inside"
	assert_no_cmdline "container workspace ($RUNTIME)"
	cfg=$ROOT/workspaces/$ws/bundle/config.json
	[[ -f $cfg ]] || _fail "no $cfg"
	# control: the bundle is read, and it names the agent's own arguments
	assert_contains '"--home","/home/node"' "$(jq -c .process.args "$cfg")" "config.json args"
	assert_eq "" "$(files_with_mark "$ROOT/workspaces/$ws/bundle" "$ROOT/runtime")" \
		"files in the bundle or the runtime state holding the marker"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200
}

t_container() {
	check_container
}

# The other runtimes, each with a controller of its own on the same root.
t_other_runtime() {
	local rt=$1
	stop_controller
	RUNTIME=$rt
	RUNTIME_BIN=$(command -v "$rt")
	start_container_controller || return 1
	check_container
}

container_prereqs
require_container_controller
run_test "scanner control: a sleep with the marker in its argv is found" t_scanner_control
run_test "host workspace: env not on any command line" t_host
run_test "container workspace ($RUNTIME): env not on any command line or in config.json" \
	t_container
for rt in crun runsc; do
	[[ $rt == "$RUNTIME" ]] && continue
	if ! command -v "$rt" >/dev/null; then
		skip "container workspace ($rt)" "$rt not installed"
		continue
	fi
	[[ $rt == runsc ]] && RUNTIME_LIST_QUIET=-quiet
	run_test "container workspace ($rt): env not on any command line or in config.json" \
		t_other_runtime "$rt"
done
