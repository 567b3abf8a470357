#!/bin/bash
# Memory snapshots (docs/operations.md "Memory snapshots"): GET /v1/ready's "checkpoint" check
# says what the probe found, named from what this script finds itself (criu missing, criu check
# failing, or both pieces there); a snapshot with "memory": true is refused 501 with the same
# words and leaves the workspace's processes running, while a snapshot without memory of the
# same workspace is made (the positive control). With crun built without CRIU the check names
# crun.
. "$(dirname "$0")/container-lib.sh"

require_container_controller

# What this machine has, found apart from the controller: EXPECT_OK, EXPECT_TEXT (a part of the
# message).
CRIU=$(command -v criu || { [[ -x /usr/sbin/criu ]] && echo /usr/sbin/criu; })
EXPECT_OK=false
if [[ -z $CRIU ]]; then
	EXPECT_TEXT="criu is not installed"
else
	CRIU_VERSION=$("$CRIU" --version | sed -n 's/^Version: //p')
	if ! "$CRIU" check >"$TMP/criu-check.out" 2>&1; then
		EXPECT_TEXT="criu $CRIU_VERSION: 'criu check' fails on kernel $(uname -r): "
		note "criu check: $(grep -m1 Error "$TMP/criu-check.out")"
	elif [[ $RUNTIME == runc ]]; then
		EXPECT_OK=true
		EXPECT_TEXT="criu $CRIU_VERSION via runc "
	else
		EXPECT_TEXT=""
	fi
fi

CHECK=
_checkpoint_probed() {
	api -q GET /v1/ready
	CHECK=$(j '.checks[] | select(.name == "checkpoint")')
	[[ -n $CHECK && $(jq -r .message <<<"$CHECK") != checking* ]]
}

t_ready_check() {
	wait_for -t 60 _checkpoint_probed || {
		_fail "no probed checkpoint check within 60 s: $STATUS $(_short "$BODY")"
		return 1
	}
	assert_eq 200 "$STATUS" "GET /v1/ready (the check is not required)"
	assert_eq true "$(j .ready)" "ready"
	assert_eq "$EXPECT_OK" "$(jq -r .ok <<<"$CHECK")" "checkpoint ok"
	assert_contains "$EXPECT_TEXT" "$(jq -r .message <<<"$CHECK")" "checkpoint message"
}

count() {
	run_cmd "$WS" 'cat $HOME/count' || return 1
	j .stdout | tr -d '\n'
}

_counted_past() {
	local n
	n=$(count) || return 1
	[[ -n $n && $n -gt $1 ]]
}

t_memory_snapshot_refused() {
	local message before
	message=$(jq -r .message <<<"$CHECK")
	new_cws WS || return 1
	run_start "$WS" "$(json_cmd 'i=0; while :; do i=$((i+1)); echo $i > $HOME/count; sleep 0.1; done')" || return 1
	wait_for -t 20 _counted_past 0 || {
		_fail "the counter never counted"
		return 1
	}
	api -q POST "/v1/workspaces/$WS/snapshots" '{"name":"with-memory","memory":true}'
	if [[ $STATUS == 404 && $(j .error.message) == "no such endpoint"* ]]; then
		skip "$1" "POST /v1/workspaces/{id}/snapshots is not routed in this build"
		return 2
	fi
	assert_eq 501 "$STATUS" "memory snapshot: $(_short "$BODY")" || return 1
	assert_eq not_implemented "$(j .error.code)" "error code"
	assert_contains "$message" "$(j .error.message)" "the refusal names the probe's finding"
	# nothing left frozen: the counter goes on
	before=$(count)
	wait_for -t 20 _counted_past "$before" || _fail "the counter stopped at $before after the refusal"
	# the positive control: the same workspace, no memory
	api -q POST "/v1/workspaces/$WS/snapshots" '{"name":"files-only","memory":false}'
	assert_eq 201 "$STATUS" "snapshot without memory: $(_short "$BODY")" || return 1
	assert_eq false "$(j .memory)" "memory"
}

t_crun_without_criu() {
	if ! command -v crun >/dev/null || crun --version | grep -q '+CRIU'; then
		skip crun-without-criu "crun missing or built with CRIU"
		return 2
	fi
	local version
	version=$(crun --version | sed -n 's/^crun version //p')
	stop_controller TERM
	start_container_controller --runtime crun || return 1
	wait_for -t 60 _checkpoint_probed || {
		_fail "no probed checkpoint check within 60 s: $(_short "$BODY")"
		return 1
	}
	assert_eq false "$(jq -r .ok <<<"$CHECK")" "checkpoint ok"
	assert_contains "crun $version was built without CRIU (no +CRIU in 'crun --version')" \
		"$(jq -r .message <<<"$CHECK")" "message"
	assert_contains "$EXPECT_TEXT" "$(jq -r .message <<<"$CHECK")" "criu's part still there"
}

run_test ready-has-checkpoint-check t_ready_check
run_or_skip memory-snapshot-refused-naming-what-is-missing t_memory_snapshot_refused
run_or_skip crun-without-criu t_crun_without_criu
