#!/bin/bash
# Seccomp profiles come only from the worker's profile directories (issue 8 item 5): the shipped
# profiles/ and each --seccomp-dir. A request names a profile by name or by an absolute path
# beneath one of them; the file is opened from the directory's fd without following symlinks.
# The profile's digest is recorded at create and checked at every start.
#
# The attack: a sandbox writes an allow-everything profile into its HOME, and a request (an
# API client that a sandbox can steer) creates a workspace with that host path as its profile.
# Positive controls: the same bytes from the profile directory are accepted and are what runs
# (a syscall the profile denies is denied inside, with the profile's own errno), and a restart
# with the profile unchanged works.
. "$(dirname "$0")/../integration/container-lib.sh"

require_container_controller

ALLOW_ALL='{"defaultAction":"SCMP_ACT_ALLOW"}'
# allows everything but unshare, which fails with EACCES: an errno no other profile gives it
DENY_UNSHARE='{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["unshare"],"action":"SCMP_ACT_ERRNO","errnoRet":13}]}'
OUTSIDE=$TMP/outside
mkdir -p "$OUTSIDE"
echo "$ALLOW_ALL" >"$OUTSIDE/allow.json"

# expect_refusal STATUS NEEDLE...: the last answer is STATUS and its message contains each NEEDLE.
expect_refusal() {
	local status=$1 n
	shift
	assert_status "$status" "refusal" || return 1
	for n in "$@"; do
		assert_contains "$n" "$(j .error.message)" "error message"
	done
	note "refused: HTTP $STATUS $(j .error.message)"
}

# refused BODY_JSON NEEDLE...: a container workspace with these fields is refused with 400
# naming seccompProfile, and no workspace is made.
refused() {
	local body=$1 before after
	shift
	api -q GET /v1/workspaces
	before=$(j '.workspaces | length')
	api -q POST /v1/workspaces "$(cws_body "$body")"
	expect_refusal 400 "$@" || return 1
	assert_eq seccompProfile "$(j .error.field)" "error field"
	api -q GET /v1/workspaces
	after=$(j '.workspaces | length')
	assert_eq "$before" "$after" "workspaces after the refused create"
}

profile_body() {
	jq -nc --arg p "$1" '{seccompProfile: $p}'
}

t_profile_in_another_home() {
	local a b host
	new_cws a || return 1
	run_cmd "$a" "echo '$ALLOW_ALL' >/home/node/evil.json" || return 1
	host=$ROOT/workspaces/$a/home/evil.json
	# control: the path is right, the sandbox wrote that file
	assert_eq "$ALLOW_ALL" "$(cat "$host" 2>&1)" "the profile the sandbox wrote, seen on the host"
	refused "$(profile_body "$host")" "$host" "not in a profile directory"
	# control: the same bytes in the profile directory are taken and are what runs
	cp "$host" "$PROFILES/copied.json"
	new_cws b "$(profile_body "$PROFILES/copied.json")" || return 1
	probe "$b" unshare || return 1
	assert_probe unshare_user ok
	api -q DELETE "/v1/workspaces/$b"
	assert_status 200 "delete $b"
}

t_symlink_refused() {
	ln -s "$OUTSIDE/allow.json" "$PROFILES/escape.json"
	ln -s "$OUTSIDE" "$PROFILES/linked-dir"
	refused "$(profile_body escape)" "$PROFILES/escape.json" "symlinks are refused"
	refused "$(profile_body "$PROFILES/escape.json")" "$PROFILES/escape.json" "symlinks are refused"
	refused "$(profile_body "$PROFILES/linked-dir/allow.json")" "symlinks are refused"
	# control: a regular file with the same bytes, by name
	cp "$OUTSIDE/allow.json" "$PROFILES/allow.json"
	local ws
	new_cws ws "$(profile_body allow)" || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq "$PROFILES/allow.json" "$(j .seccompProfile)" "the profile the name resolved to"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete $ws"
}

t_dotdot_refused() {
	refused "$(profile_body "$PROFILES/../outside/allow.json")" '".."'
	refused "$(profile_body "../outside/allow.json")" "profile name"
	refused "$(profile_body "..")" "profile name"
	refused "$(profile_body "$OUTSIDE/allow.json")" "$OUTSIDE/allow.json" "not in a profile directory"
}

# A profile from the directory, by name: recorded with its path and digest, and in force inside.
t_profile_used() {
	echo "$DENY_UNSHARE" >"$PROFILES/deny-unshare.json"
	new_cws WS "$(profile_body deny-unshare)" || return 1
	api -q GET "/v1/workspaces/$WS"
	assert_eq "$PROFILES/deny-unshare.json" "$(j .seccompProfile)" seccompProfile
	assert_eq "sha256:$(sha256sum <"$PROFILES/deny-unshare.json" | cut -d' ' -f1)" \
		"$(j .seccompDigest)" seccompDigest
	probe "$WS" unshare || return 1
	assert_probe unshare_user EACCES
}

# Edited after create: the restart fails naming the profile and both digests, nothing runs;
# unchanged (before, and after putting the bytes back), the restart works.
t_edited_profile() {
	local prof=$PROFILES/deny-unshare.json created now procs
	[[ -n ${WS:-} ]] || return 1
	api -q GET "/v1/workspaces/$WS"
	created=$(j .seccompDigest)
	api -q POST "/v1/workspaces/$WS/restart"
	assert_status 200 "restart with the profile unchanged" || return 1
	probe "$WS" unshare || return 1
	assert_probe unshare_user EACCES
	cp "$prof" "$TMP/deny-unshare.orig"
	echo "$ALLOW_ALL" >"$prof"
	now="sha256:$(sha256sum <"$prof" | cut -d' ' -f1)"
	assert_ne "$created" "$now" "digest after the edit"
	api -q POST "/v1/workspaces/$WS/restart"
	expect_refusal 400 "$prof" "$created" "$now" "changed since the workspace was created" || return 1
	assert_eq seccompProfile "$(j .error.field)" "error field"
	api -q GET "/v1/workspaces/$WS"
	assert_eq failed "$(j .state)" "workspace state"
	procs=$(ws_cgroup_procs "$WS")
	assert_eq '' "$procs" "processes in the workspace's cgroups"
	if runtime_knows "$WS"; then
		_fail "the runtime still lists $WS"
	fi
	cp "$TMP/deny-unshare.orig" "$prof"
	api -q POST "/v1/workspaces/$WS/restart"
	assert_status 200 "restart with the profile's bytes back" || return 1
	probe "$WS" unshare || return 1
	assert_probe unshare_user EACCES
}

# The worker's default profile obeys the same rule: outside the directories the controller does
# not start; a name in one of them is what a workspace without seccompProfile gets.
t_worker_default() {
	local out rc ws
	out=$("$DAEMON" --root "$TMP/root-2" --worker "$WORKER" --runtime "$RUNTIME" \
		--seccomp-dir "$PROFILES" --seccomp-profile "$OUTSIDE/allow.json" 2>&1 </dev/null)
	rc=$?
	assert_eq 64 "$rc" "exit status with --seccomp-profile outside the directories"
	assert_contains "not in a profile directory" "$out" "its message"
	stop_controller
	start_container_controller --seccomp-profile deny-unshare || return 1
	new_cws ws || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq "$PROFILES/deny-unshare.json" "$(j .seccompProfile)" "the default profile"
	probe "$ws" unshare || return 1
	assert_probe unshare_user EACCES
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete $ws"
}

run_test "a profile in another workspace's HOME is refused (400, seccompProfile)" t_profile_in_another_home
run_test "a symlink in the profile directory is refused" t_symlink_refused
run_test "\"..\" and paths outside the directories are refused" t_dotdot_refused
run_test "control: a profile from --seccomp-dir is recorded and in force" t_profile_used
run_test "a profile edited after create fails the restart with both digests" t_edited_profile
run_test "--seccomp-profile must be in a profile directory" t_worker_default
