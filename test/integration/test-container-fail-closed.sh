#!/bin/bash
# Fail closed (issue 3 item 5, DESIGN §1 and §6): a container workspace whose runtime, image or
# seccomp profile is unavailable is refused with a message naming the missing piece, leaves
# nothing behind (no process, cgroup, runtime state, mount or directory) and never runs on the
# host instead. The positive control is a valid request on the same controller that succeeds
# and runs inside a container.
. "$(dirname "$0")/container-lib.sh"

container_prereqs

# nothing_left: the controller holds no workspace and this worker left nothing on the host.
nothing_left() {
	api -q GET /v1/workspaces
	assert_eq 0 "$(j '.workspaces | length')" "workspaces after the refusal"
	local left
	left=$(ls -A "$ROOT/workspaces" 2>/dev/null)
	assert_eq '' "$left" "entries in $ROOT/workspaces"
	left=$(cgroup_dirs "$WORKER-")
	assert_eq '' "$left" "cgroups of this worker"
	# (the controller's own lxcfs, serving ROOT/lxcfs, runs for the controller's lifetime, and
	# its readiness probe `RUNTIME --root ROOT/runtime --version` may be running at any moment)
	left=$(pgrep -af -- "$ROOT/" | grep -v -e station-sandboxd -e pgrep -e " $ROOT/lxcfs\$" \
		-e " --root $ROOT/runtime --version\$")
	assert_eq '' "$left" "processes naming the root"
	left=$(ws_mounts "$WORKER-")
	assert_eq '' "$left" "mounts of this worker"
	if [[ -d $ROOT/runtime ]]; then
		left=$(runtime_cli list -q 2>/dev/null)
		assert_eq '' "$left" "runtime containers"
	fi
}

# expect_refusal STATUS NEEDLE...: the last answer is STATUS and its message contains each
# NEEDLE.
expect_refusal() {
	local status=$1 n
	shift
	assert_status "$status" "refusal"
	for n in "$@"; do
		assert_contains "$n" "$(j .error.message)" "error message"
	done
	note "refused: HTTP $STATUS $(j .error.message)"
}

ready_check() {
	j ".checks[] | select(.name == \"$1\") | .$2"
}

# --- the runtime ---

t_runtime_absent() {
	start_controller --worker "$WORKER" --runtime /nonexistent/runc --import-dir "$TMP" || return 1
	api -q GET /v1/ready
	assert_eq false "$(ready_check runtime ok)" "ready: runtime check ok"
	assert_contains /nonexistent/runc "$(ready_check runtime message)" "ready: runtime message"
	note "ready runtime check: $(ready_check runtime message)"
	container_build_image && container_import_image || return 1
	api -q POST /v1/workspaces "$(cws_body)"
	expect_refusal 503 /nonexistent/runc
	nothing_left
	stop_controller
}

# With the container adapter as the default the worker is not ready at all.
t_runtime_absent_not_ready() {
	start_controller_any --runtime /nonexistent/runc --default-adapter container || return 1
	api -q GET /v1/ready
	assert_status 503 "GET /v1/ready"
	assert_eq false "$(j .ready)" ready
	assert_eq false "$(ready_check runtime ok)" "runtime check ok"
	assert_contains /nonexistent/runc "$(ready_check runtime message)" "runtime check message"
	api -q POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
	expect_refusal 503 /nonexistent/runc
	nothing_left
	stop_controller
}

# A runtime that is there but broken: its own words reach the message.
t_runtime_broken() {
	local fake=$TMP/broken-runc
	printf '#!/bin/sh\necho "broken on purpose" >&2\nexit 1\n' >"$fake"
	chmod 0755 "$fake"
	start_controller --worker "$WORKER" --runtime "$fake" || return 1
	api -q GET /v1/ready
	assert_eq false "$(ready_check runtime ok)" "ready: runtime check ok"
	assert_contains "broken on purpose" "$(ready_check runtime message)" "ready: runtime message"
	api -q POST /v1/workspaces "$(cws_body)"
	expect_refusal 503 broken-runc "broken on purpose"
	nothing_left
	stop_controller
}

# --- the image ---

t_image_not_in_store() {
	local missing
	missing=sha256:$(printf '0%.0s' {1..64})
	api -q POST /v1/workspaces "$(jq -nc --arg i "busybox@$missing" '{adapter: "container", image: $i}')"
	expect_refusal 400 "$missing"
	assert_eq image "$(j .error.field)" "error field"
	api -q POST /v1/workspaces "$(jq -nc --arg i "$missing" '{adapter: "container", image: $i}')"
	expect_refusal 400 "$missing"
	nothing_left
}

# A layout whose layer blob was altered after it was written, imported into an empty store: the
# import is refused naming the digest, and the store is left empty. (A blob whose digest the
# store already holds is not read again, so this runs before any other import.)
t_digest_mismatch() {
	local bad=$TMP/bad-image blob digest left
	start_container_controller || return 1
	python3 "$MAKE_IMAGE" "$bad" >/dev/null || return 1
	# the plain-tar layer (the second one): flip one byte in its middle
	digest=$(jq -r '.layers[1].digest' "$bad/blobs/sha256/$(jq -r '.manifests[0].digest' "$bad/index.json" | cut -d: -f2)")
	blob=$bad/blobs/sha256/${digest#sha256:}
	python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0xff; open(p, "wb").write(b)' "$blob"
	api -q POST /v1/images "$(jq -nc --arg p "$bad" '{path: $p, name: "corrupt"}')"
	# the message names the blob by its first 12 hex digits
	expect_refusal 400 "sha256:$(cut -c8-19 <<<"$digest")" "digest mismatch"
	[[ $STATUS == 500 ]] && diag "BUG: -EBADMSG from the image store is answered 500 internal" \
		"(src/api/validate.c error_http_status has no case for it)"
	api -q GET /v1/images
	assert_eq '[]' "$(j '.images')" "images in the store"
	left=$(find "$ROOT/images" -mindepth 1 ! -type d ! -name lock | sort)
	assert_eq '' "$left" "files in the image store"
	left=$(find "$ROOT/images/layers" -mindepth 1 -maxdepth 1 2>/dev/null)
	assert_eq '' "$left" "unpacked layers"
	# control: the same layout, intact, imports
	python3 "$MAKE_IMAGE" "$TMP/good-image" >/dev/null || return 1
	api -q POST /v1/images "$(jq -nc --arg p "$TMP/good-image" '{path: $p, name: "intact"}')"
	assert_status 201 "import of the intact layout"
	api -q DELETE "/v1/images/$(j .digest)"
	assert_status 200 "remove the intact image"
	stop_controller
}

# --- the seccomp profile ---

# refuse_profile PATH NEEDLE...: a workspace with this profile is refused with 400 naming it.
refuse_profile() {
	local path=$1
	shift
	api -q POST /v1/workspaces "$(cws_body "$(jq -nc --arg p "$path" '{seccompProfile: $p}')")"
	expect_refusal 400 "$@" || return 1
	assert_eq seccompProfile "$(j .error.field)" "error field"
	nothing_left
}

t_profile_missing() {
	refuse_profile "$PROFILES/no-such-profile.json" "$PROFILES/no-such-profile.json"
}

# Root reads a mode-000 file (CAP_DAC_OVERRIDE), so "unreadable" is a path that cannot be read
# as a file by anyone: a directory.
t_profile_unreadable() {
	mkdir -p "$PROFILES/profile-dir.json"
	refuse_profile "$PROFILES/profile-dir.json" "$PROFILES/profile-dir.json"
}

t_profile_invalid_json() {
	printf '{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [' >"$PROFILES/truncated.json"
	refuse_profile "$PROFILES/truncated.json" "$PROFILES/truncated.json"
}

t_profile_unknown_action() {
	echo '{"defaultAction":"SCMP_ACT_BOGUS"}' >"$PROFILES/bogus-default.json"
	refuse_profile "$PROFILES/bogus-default.json" SCMP_ACT_BOGUS
	jq -c '.syscalls[0].action = "SCMP_ACT_NOPE"' "$DEFAULT_PROFILE" >"$PROFILES/bogus-rule.json"
	refuse_profile "$PROFILES/bogus-rule.json" SCMP_ACT_NOPE
}

t_profile_relative() {
	api -q POST /v1/workspaces "$(cws_body '{"seccompProfile":"profiles/default.json"}')"
	assert_status 400 "relative profile path"
	note "relative profile path: $(j .error.message)"
	nothing_left
}

# A profile that disappears after the workspace was made: the next container start (restart)
# fails naming it and leaves the workspace failed with nothing running — it never starts
# without its filter. Putting the profile back and restarting again works (the control).
t_profile_gone_at_restart() {
	local ws prof=$PROFILES/vanishing.json
	cp "$DEFAULT_PROFILE" "$prof"
	new_cws ws "$(jq -nc --arg p "$prof" '{seccompProfile: $p}')" || return 1
	rm "$prof"
	api -q POST "/v1/workspaces/$ws/restart"
	expect_refusal 400 "$prof"
	api -q GET "/v1/workspaces/$ws"
	assert_eq failed "$(j .state)" "workspace state"
	assert_contains "$prof" "$(j .reason)" "workspace reason"
	local procs
	procs=$(ws_cgroup_procs "$ws")
	assert_eq '' "$procs" "processes in the workspace's cgroups"
	if runtime_knows "$ws"; then
		_fail "the runtime still lists $ws: $(runtime_cli state "$ws" 2>&1 | jq -c '{status, pid}' 2>/dev/null)"
	fi
	api -q POST "/v1/workspaces/$ws/commands" "$(json_cmd true)"
	assert_status 409 "a command on the failed workspace"
	cp "$DEFAULT_PROFILE" "$prof"
	api -q POST "/v1/workspaces/$ws/restart"
	assert_status 200 "restart with the profile back" || return 1
	probe "$ws" caps || return 1
	assert_probe Seccomp 2
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 delete
}

# --- the network ---

# start_net_controller [FLAGS...]: a controller as require_container_controller starts it,
# with the given network flags.
start_net_controller() {
	start_controller --worker "$WORKER" --runtime "$RUNTIME" --seccomp-dir "$PROFILES" \
		--import-dir "$TMP" "$@" || return 1
	container_build_image && container_import_image
}

# net_refused EXTRA NEEDLE...: a container create with EXTRA (its network) is refused with 503
# naming each NEEDLE and leaves nothing; a "none" workspace on the same controller runs (the
# control: only the network is missing).
net_refused() {
	local extra=$1 ws
	shift
	api -q POST /v1/workspaces "$(cws_body "$extra")"
	expect_refusal 503 "$@"
	nothing_left
	new_cws ws || return 1
	run_cmd "$ws" 'echo inside' || return 1
	assert_eq inside "$(j .stdout | tr -d '\n')" "the control's output"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete the control"
}

t_network_off() {
	start_net_controller --network-range none || return 1
	api -q GET /v1/worker
	assert_eq '["none"]' "$(j .networks)" "the worker's networks"
	api -q POST /v1/workspaces "$(cws_body '{"network":"bridge","egress":{"allow":[]}}')"
	assert_status 400 "an egress policy with bridge"
	assert_eq egress "$(j .error.field)" "the field at fault"
	net_refused '{"network":"bridge"}' 'network "bridge" is not available' 'networking is off'
	net_refused '{"network":"restricted"}' 'network "restricted" is not available'
	stop_controller
}

t_network_bad_range() {
	start_net_controller --network-range 10.231.7.5/24 || return 1
	api -q GET /v1/ready
	assert_eq false "$(ready_check networkRange ok)" "ready: networkRange ok"
	assert_contains 'bad network range "10.231.7.5/24"' "$(ready_check networkRange message)" \
		"ready: networkRange message"
	net_refused '{"network":"bridge"}' networkRange 'bad network range'
	stop_controller
}

# Another controller holds the bridge (its lock): this one does not touch the bridge, its
# ports or its table, says so in ready, and refuses networked creates.
t_network_bridge_taken() {
	local bridge=stf$(($$ % 100000)) holder
	local lock=/run/station-sandbox-net-$bridge.lock
	# its own stdio: a holder left behind must not keep the test's output open
	flock "$lock" sleep 600 </dev/null >/dev/null 2>&1 &
	holder=$!
	wait_for -t 5 test -e "$lock" || _fail "no lock file" || return 1
	start_net_controller --network-range 10.233.$(($$ % 250)).0/24 --network-bridge "$bridge" ||
		{ pkill -P "$holder"; return 1; }
	api -q GET /v1/ready
	assert_eq false "$(ready_check bridge ok)" "ready: bridge ok"
	assert_contains "used by another controller" "$(ready_check bridge message)" \
		"ready: bridge message"
	net_refused '{"network":"restricted","egress":{"allow":[]}}' bridge 'another controller'
	ip link show "$bridge" >/dev/null 2>&1 && _fail "the bridge $bridge was made"
	nft list table inet "$bridge" >/dev/null 2>&1 && _fail "the table inet $bridge was made"
	stop_controller
	pkill -P "$holder"
	wait "$holder" 2>/dev/null
	rm -f "$lock"
}

# --- the positive control ---

t_valid_request_runs_in_a_container() {
	local ws
	new_cws ws "$(jq -nc --arg p "$DEFAULT_PROFILE" '{seccompProfile: $p}')" || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq container "$(j .adapter)" adapter
	assert_eq ready "$(j .state)" state
	assert_eq "$IMAGE" "$(j .image)" image
	run_cmd "$ws" 'cat /proc/self/uid_map; hostname' || return 1
	assert_eq exited "$(j .status)" status
	assert_match "^ +0 +$HOST_ID_BASE +65536"$'\n'"workspace\$" "$(j .stdout)" \
		"uid map and hostname inside"
	runtime_knows "$ws" || _fail "the runtime does not list $ws"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 delete
}

run_test "digest mismatch: import refused naming the digest, store left empty" t_digest_mismatch
run_test "runtime absent: ready names it, create refused naming it, nothing left" t_runtime_absent
run_test "runtime absent with container as default adapter: not ready (503)" t_runtime_absent_not_ready
run_test "runtime broken: its error reaches ready and create" t_runtime_broken
run_test "networking off: bridge and restricted refused (503), none runs" t_network_off
run_test "network range invalid: ready names it, networked creates refused" t_network_bad_range
run_test "bridge held by another controller: ready names it, nothing made" t_network_bridge_taken

require_container_controller
run_test "image not in the store: 400 naming the digest" t_image_not_in_store
run_test "profile missing: 400 naming the path" t_profile_missing
run_test "profile unreadable (a directory): 400 naming the path" t_profile_unreadable
run_test "profile invalid JSON: 400 naming the path" t_profile_invalid_json
run_test "profile with an unknown action: 400 naming the action" t_profile_unknown_action
run_test "profile path relative: 400" t_profile_relative
run_test "profile gone at restart: refused naming it, workspace failed, nothing runs" t_profile_gone_at_restart
run_test "control: a valid request runs in a container" t_valid_request_runs_in_a_container
