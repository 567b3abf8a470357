#!/bin/bash
# Issue 8 item 1: the controller, root on the host, never resolves a path through a tree the
# sandbox or an image writes. Each attack plants a symlink (or a FIFO) where the controller
# expects a directory or a file, makes the controller act on it (restart, delete, create, HOME
# seeding), and asserts that a root-owned host "victim" kept its owner, mode and contents.
# Positive controls: the planted symlink does resolve to the victim on the host, and the
# detector sees a change when the test itself chowns the victim through the symlink's path.
. "$(dirname "$0")/../integration/container-lib.sh"

require_container_controller
CWD='.cwd="/"' # ~/workspace, the default, is what some tests replace

# victim NAME: a root-owned 0700 host directory holding a marker file; prints its path.
victim() {
	local d=$TMP/victim-$1
	mkdir -p "$d"
	echo "marker-$1" >"$d/marker"
	chown -R 0:0 "$d"
	chmod 0700 "$d"
	chmod 0600 "$d/marker"
	echo "$d"
}

# victim_state DIR: owner, mode and a digest of everything below (names, owners, contents).
victim_state() {
	local d=$1
	printf '%s ' "$(stat -c '%u:%g %a' "$d")"
	(cd "$d" && find . -printf '%p %u:%g %m %s\n' | sort && cat ./* 2>/dev/null) | md5sum | cut -c1-32
}

# detector_control LINK VICTIM: the symlink at LINK (a host path under the workspace) resolves
# to VICTIM, and a chown through LINK changes victim_state (then it is put back).
detector_control() {
	local link=$1 v=$2 before
	assert_eq "$v" "$(readlink -f "$link")" "the planted symlink resolves to the victim" || return 1
	before=$(victim_state "$v")
	chown 4242:4242 "$link"
	assert_ne "$before" "$(victim_state "$v")" "the detector sees a chown through the symlink"
	chown 0:0 "$v"
	chmod 0700 "$v"
	assert_eq "$before" "$(victim_state "$v")" "victim restored"
}

# An image whose user is node (1000:1000) with a /home/node of its own.
build_image node 1000:1000 'add("home", D, mode=0o755)
add("home/node", D, mode=0o755, uid=1000, gid=1000)' || exit 1
NODE_IMG=$IMG

# --- restart -------------------------------------------------------------------------------

# The reported attack: the sandbox user replaces ~/workspace with a symlink to a host
# directory; POST …/restart used to chmod it 0755 and chown it to the sandbox's host uid.
t_restart_workspace_symlink_as_user() {
	local ws v before
	v=$(victim restart-user)
	before=$(victim_state "$v")
	new_cws ws "{\"image\":\"$NODE_IMG\"}" || return 1
	run_cmd "$ws" "id -u && rm -rf ~/workspace && ln -s $v ~/workspace && echo planted" "$CWD" || return 1
	assert_eq "1000 planted" "$(j .stdout | tr '\n' ' ' | sed 's/ *$//')" "planted as node" || return 1
	detector_control "$ROOT/workspaces/$ws/home/workspace" "$v" || return 1
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 restart || return 1
	assert_eq "$before" "$(victim_state "$v")" "the victim after the restart"
	# the symlink is the sandbox's business: left as it is, not followed
	run_cmd "$ws" "readlink ~/workspace" "$CWD" || return 1
	assert_eq "$v" "$(j .stdout | tr -d '\n')" "~/workspace is still the sandbox's symlink"
}

# Container root (the busybox image's user) plants symlinks in run/, which it owns: run/agent
# (the agent binary's mount point dir) and run/agent.sock.
t_restart_run_symlinks_as_root() {
	local ws v before f
	v=$(victim restart-root)
	before=$(victim_state "$v")
	new_cws ws || return 1
	run_cmd "$ws" "id -u && mv /run/station/agent /run/station/old-agent &&
		ln -s $v /run/station/agent && echo planted" "$CWD" || return 1
	assert_eq "0 planted" "$(j .stdout | tr '\n' ' ' | sed 's/ *$//')" "planted as container root" ||
		return 1
	detector_control "$ROOT/workspaces/$ws/run/agent" "$v" || return 1
	api -q POST "/v1/workspaces/$ws/restart"
	# run/ is the controller's protocol directory: the planted entry is removed, not followed
	assert_status 200 restart
	assert_eq "$before" "$(victim_state "$v")" "the victim after the restart"
	[[ ! -e $v/station-agent ]] || _fail "a station-agent mount point was made in the victim"
	[[ -d $ROOT/workspaces/$ws/run/agent && ! -L $ROOT/workspaces/$ws/run/agent ]] ||
		_fail "run/agent is not a directory again"
	run_cmd "$ws" 'echo alive' "$CWD" || return 1
	assert_eq alive "$(j .stdout | tr -d '\n')" "the restarted workspace runs commands"
}

resolves_to() {
	[[ $(readlink -f "$1" 2>/dev/null) == "$2" ]]
}

# Container root replaces run/agent.sock with a symlink to another socket on the host; a
# controller restart reconnects to the workspace's socket and must not follow it there (the
# controller would speak, as root, to whatever listens: here a listener that records it).
t_agent_socket_symlink() {
	local ws sock=$TMP/victim.sock log=$TMP/victim-sock.log
	: >"$log"
	cat >"$TMP/listener.py" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("connected\n")
    c.close()
EOF
	python3 "$TMP/listener.py" "$sock" "$log" </dev/null &
	local listener=$!
	wait_for -t 30 test -S "$sock" || {
		_fail "the victim socket never appeared"
		kill "$listener"
		return 1
	}
	new_cws ws || return 1
	run_cmd "$ws" "rm /run/station/agent.sock && ln -s $sock /run/station/agent.sock && echo planted" "$CWD" ||
		return 1
	assert_eq planted "$(j .stdout | tr -d '\n')" planted
	# positive control: a connection through the planted path reaches the victim listener
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' \
		"$ROOT/workspaces/$ws/run/agent.sock"
	wait_for -t 5 grep -q connected "$log" || _fail "control: the listener saw no connection"
	: >"$log"
	restart_controller || return 1
	api -q GET "/v1/workspaces/$ws"
	diag "workspace after the controller restart: $(j '{state, reason}' | tr -d '\n')"
	assert_eq "" "$(cat "$log")" "connections the controller made to the victim socket"
	kill "$listener"
	wait "$listener" 2>/dev/null
	return 0
}

# A loop in the sandbox swaps ~/workspace between a directory and a symlink to the victim while
# the test restarts the workspace again and again: whatever state the restart finds, the victim
# never changes.
t_restart_swap_loop() {
	local ws v before i seen=0
	v=$(victim swap)
	before=$(victim_state "$v")
	new_cws ws "{\"image\":\"$NODE_IMG\"}" || return 1
	for i in 1 2 3 4 5 6; do
		# the run lasts until the restart kills it
		run_start "$ws" "$(json_cmd "while :; do rm -rf ~/workspace; ln -s $v ~/workspace; rm -f ~/workspace; mkdir ~/workspace; done" "$CWD")" ||
			return 1
		# positive control: the loop does plant the symlink that resolves to the victim
		if wait_for -t 5 resolves_to "$ROOT/workspaces/$ws/home/workspace" "$v"; then
			seen=$((seen + 1))
		fi
		api -q POST "/v1/workspaces/$ws/restart"
		assert_status 200 "restart $i" || return 1
		assert_eq "$before" "$(victim_state "$v")" "the victim after restart $i" || return 1
	done
	assert_le 1 "$seen" "restarts during which the symlink was seen resolving to the victim"
}

# --- delete --------------------------------------------------------------------------------

t_delete_with_symlinks() {
	local ws v before
	v=$(victim delete)
	before=$(victim_state "$v")
	new_cws ws || return 1
	run_cmd "$ws" "ln -s $v /home/node/dirlink && ln -s $v/marker /home/node/filelink &&
		mkdir -p /home/node/workspace/deep && ln -s $v /home/node/workspace/deep/up &&
		ln -s $v /run/station/runlink && echo planted" "$CWD" || return 1
	assert_eq planted "$(j .stdout | tr -d '\n')" planted || return 1
	detector_control "$ROOT/workspaces/$ws/home/dirlink" "$v" || return 1
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 delete || return 1
	wait_for -t 10 ws_clean "$ws" || assert_clean "$ws"
	assert_eq "$before" "$(victim_state "$v")" "the victim after the delete"
	assert_eq "marker-delete" "$(cat "$v/marker")" "the victim's file"
}

# --- create: HOME seeding from the image ---------------------------------------------------

# The image's /home/node/workspace is a symlink to a host directory: seeding copies the link,
# prepare_home used to chmod and chown its target.
t_create_image_workspace_symlink() {
	local ws v before
	v=$(victim seed)
	before=$(victim_state "$v")
	build_image seedlink 1000:1000 "add('home', D, mode=0o755)
add('home/node', D, mode=0o755, uid=1000, gid=1000)
add('home/node/workspace', S, target='$v', uid=1000, gid=1000)
add('home/node/up', S, target='$v', uid=1000, gid=1000)" || return 1
	api -q POST /v1/workspaces "$(cws_body "{\"image\":\"$IMG\"}")"
	[[ $STATUS == 201 ]] && WORKSPACES+=("$(j .id)")
	diag "create with /home/node/workspace -> host dir: HTTP $STATUS $(_short "$BODY")"
	assert_eq "$before" "$(victim_state "$v")" "the victim after the create"
	if [[ $STATUS == 201 ]]; then
		ws=$(j .id)
		detector_control "$ROOT/workspaces/$ws/home/up" "$v"
		[[ -L $ROOT/workspaces/$ws/home/workspace ]] ||
			_fail "the image's symlink was replaced rather than left alone"
	fi
}

# The image's /home is a symlink to a host directory holding node/secret: the seed must read
# the image's /home/node inside the image's root, never the host's.
t_create_image_home_symlink_out() {
	local ws hosthome=$TMP/hosthome
	mkdir -p "$hosthome/node"
	echo host-secret >"$hosthome/node/secret"
	build_image homeout 0:0 "add('home', S, target='$hosthome')" || return 1
	new_cws ws "{\"image\":\"$IMG\"}" || return 1
	# positive control: on the host, the rootfs's /home/node does lead to the secret
	assert_eq host-secret "$(cat "$ROOT/workspaces/$ws/rootfs/home/node/secret" 2>/dev/null)" \
		"the image's /home/node resolves to the host directory on the host" || return 1
	[[ ! -e $ROOT/workspaces/$ws/home/secret ]] || _fail "the host's secret was copied into HOME"
	run_cmd "$ws" 'cat /home/node/secret 2>&1; echo rc=$?' "$CWD" || return 1
	assert_match 'rc=1$' "$(j .stdout | tr '\n' ' ' | sed 's/ *$//')" "the sandbox cannot read it"
}

# --- create: the image's /etc/passwd -------------------------------------------------------

api_bounded() {
	STATUS=$(curl -sS --max-time 20 --unix-socket "$SOCK" -X POST -o "$TMP/last-body" \
		-w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$1" \
		http://station/v1/workspaces 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/last-body")
	[[ $STATUS == 201 ]] && WORKSPACES+=("$(j .id)")
	return 0
}

t_passwd_fifo() {
	build_image fifo node "add('etc', D, mode=0o755)
add('etc/passwd', F, mode=0o644)" || return 1
	# positive control: the layer really holds a FIFO there
	local n
	n=$(find "$ROOT/images/layers" -path '*/etc/passwd' -type p | wc -l)
	assert_eq 1 "$n" "FIFOs at etc/passwd in the layer store" || return 1
	api_bounded "$(cws_body "{\"image\":\"$IMG\"}")"
	assert_eq 400 "$STATUS" "create with /etc/passwd a FIFO" || return 1
	assert_contains "/etc/passwd" "$BODY" "the error names the file"
	api -q GET /v1/ready
	assert_status 200 "the controller still answers"
}

t_passwd_symlink_to_host() {
	local hp=$TMP/host-passwd
	echo 'node:x:4242:4242:node:/home/node:/bin/sh' >"$hp"
	build_image pwlink node "add('etc', D, mode=0o755)
add('etc/passwd', S, target='$hp')" || return 1
	api_bounded "$(cws_body "{\"image\":\"$IMG\"}")"
	if [[ $STATUS == 201 ]]; then
		run_cmd "$(j .id)" 'id -u' "$CWD"
		_fail "create succeeded; the sandbox runs as uid $(j .stdout | tr -d '\n') (4242 is the host file's)"
		return 1
	fi
	assert_eq 400 "$STATUS" "create with /etc/passwd -> a host file" || return 1
	assert_contains "/etc/passwd" "$BODY" "the error names the file"
}

# positive control for both: the same user name resolves through a regular /etc/passwd
t_passwd_regular_control() {
	local ws
	new_cws ws "{\"image\":\"$NODE_IMG\"}" || return 1
	run_cmd "$ws" 'id -u' "$CWD" || return 1
	assert_eq 1000 "$(j .stdout | tr -d '\n')" "uid of node from the image's /etc/passwd"
}

run_test "restart: ~/workspace -> host dir, planted as the sandbox user, is not followed" t_restart_workspace_symlink_as_user
run_test "restart: run/agent -> host dir, planted as container root, is not followed" t_restart_run_symlinks_as_root
run_test "controller restart: run/agent.sock -> a host socket is not connected to" t_agent_socket_symlink
run_test "restart: ~/workspace swapped dir/symlink in a loop, the victim never changes" t_restart_swap_loop
run_test "delete: symlinks in HOME and run/ are removed, their targets kept" t_delete_with_symlinks
run_test "create: the image's /home/node/workspace -> host dir is not followed" t_create_image_workspace_symlink
run_test "create: the image's /home -> host dir is resolved inside the image" t_create_image_home_symlink_out
run_test "create: /etc/passwd a FIFO is refused without blocking the controller" t_passwd_fifo
run_test "create: /etc/passwd -> a host file is refused" t_passwd_symlink_to_host
run_test "control: a regular /etc/passwd resolves the image user" t_passwd_regular_control
