#!/bin/bash
# A metadata root the controller makes itself (the usual first start: `--root /var/lib/station`
# that does not exist yet) works for container workspaces. The runtime mounts the rootfs,
# HOME and run dir as the container's root, host uid 300000 in the user namespace, so every
# directory from / down to <root>/workspaces/<id> must let that uid pass: the controller makes
# its root 0711, and a create under a directory that does not let it pass fails closed, naming
# the directory.
. "$(dirname "$0")/container-lib.sh"

container_prereqs
container_build_image || {
	not_ok "busybox image builds"
	exit 1
}

# Every controller of this script uses a root it makes itself.
rm -rf "$ROOT"
ROOT=$TMP/fresh/root
SOCK=$ROOT/station.sock
CONTROLLER_LOG=$TMP/controller.log
mkdir -p "$TMP/fresh"
chmod 0755 "$TMP/fresh"

t_fresh_root() {
	local ws
	start_container_controller || return 1
	assert_eq 711 "$(stat -c %a "$ROOT")" "mode of the root the controller made"
	container_import_image || return 1
	api -q POST /v1/workspaces "$(cws_body)"
	assert_status 201 "create on a fresh root" || return 1
	ws=$(j .id)
	WORKSPACES+=("$ws")
	run_cmd "$ws" 'echo hi' || return 1
	assert_eq hi "$(j .stdout | tr -d '\n')" "a command in the workspace"
}

# A directory above the root that the container's root cannot search: create fails closed,
# naming that directory, and leaves nothing behind.
t_closed_parent() {
	local before after
	before=$(ls -A "$ROOT/workspaces"; cgroup_dirs "$WORKER-"; ws_mounts "$WORKER-"; runtime_cli list -q)
	chmod 0700 "$TMP/fresh"
	api -q POST /v1/workspaces "$(cws_body)"
	chmod 0755 "$TMP/fresh"
	assert_status 503 "create under a closed directory"
	assert_contains "\"$TMP/fresh\"" "$(j .error.message)" "error message names the directory"
	note "refused: $(j .error.message)"
	after=$(ls -A "$ROOT/workspaces"; cgroup_dirs "$WORKER-"; ws_mounts "$WORKER-"; runtime_cli list -q)
	assert_eq "$before" "$after" "workspace dirs, cgroups, mounts, runtime containers"
}

# Control: the same directory searchable again (0755): create works.
t_open_parent() {
	new_cws ws || return 1
	run_cmd "$ws" 'echo hi' || return 1
	assert_eq hi "$(j .stdout | tr -d '\n')" "a command in the workspace"
}

run_test "the controller makes its root 0711 and container workspaces work under it" t_fresh_root
run_test "a directory above the root that others cannot search: 503 naming it, nothing left" t_closed_parent
run_test "control: the same directory searchable again" t_open_parent
