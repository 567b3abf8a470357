#!/bin/bash
# Attack: the workspace's agent answers file operations with frames the protocol does not allow
# (container root may control what listens on the agent's socket). Every file session frame is
# hostile: a NAME with '/', an ETAG that would inject a header, an out-of-range ERRNO, more
# DATA than announced, a 100 MiB frame, too many LIST entries, a bad MODE or FILE_TYPE, END
# without INFO, an EVENT in a READ, a connection that just closes. Each must end in a clear 502
# (or, once a download's headers are out, a response cut short), never a crash, never the bad
# bytes in a response. Positive control: the same agent's well-formed STAT answers 200, and the
# controller still serves a real workspace afterwards.
#
# The hostile agent is test/helpers/agent-impostor (see test-agent-reports.sh).
. "$(dirname "$0")/../integration/lib.sh"

IMPOSTOR=$BUILD/test/helpers/agent-impostor
[[ -x $IMPOSTOR ]] || {
	skip "$TEST_NAME" "$IMPOSTOR not built"
	exit 0
}
# Under sanitizers the impostor execs the sanitized agent, and the controller must start the
# impostor itself rather than the sanitized agent it would put in place of the shipped one.
export STATION_TEST_REAL_AGENT=${STATION_TEST_HOST_AGENT:-$AGENT}
unset STATION_TEST_HOST_AGENT
require_controller --agent "$IMPOSTOR"
new_ws REAL || exit 1
new_ws EVIL '{"env":{"STATION_TEST_IMPOSTOR":"1"}}' || exit 1

fget() {
	api -q GET "/v1/workspaces/$EVIL/files$1"
}

t_good() {
	fget "/stat?path=good"
	assert_status 200 "a well-formed STAT"
	assert_eq 'file "ab-1-2" 0644' "$(j '"\(.type) \(.etag) \(.mode)"')" entry
}

t_hostile() {
	local p
	for p in name-slash too-many; do
		fget "/list?path=$p"
		assert_status 502 "LIST $p"
		assert_eq bad_gateway "$(j .error.code)" "code ($p)"
		assert_contains "\"$p\"" "$(j .error.message)" "message names the path ($p)"
	done
	for p in etag-crlf errno-big huge-frame mode-big type-bad early-end hang-up; do
		fget "/stat?path=$p"
		assert_status 502 "STAT $p"
		assert_eq bad_gateway "$(j .error.code)" "code ($p)"
	done
	kill -0 "$CONTROLLER_PID" || _fail "the controller died"
}

# A READ's headers go out with INFO; what breaks the contract after them cuts the response
# short of its Content-Length, so the client cannot take it for the file.
t_read_cut_short() {
	local p rc
	for p in data-over event-read; do
		curl -sS --max-time 10 --unix-socket "$SOCK" -o "$TMP/dl" \
			"http://station/v1/workspaces/$EVIL/files?path=$p" 2>"$TMP/err"
		rc=$?
		assert_ne 0 "$rc" "curl accepted the READ of $p"
		if [[ -f $TMP/dl ]] && grep -q def "$TMP/dl"; then
			_fail "bytes past the announced size reached the client ($p)"
		fi
	done
	return 0
}

t_controller_fine() {
	local home
	api -q GET "/v1/workspaces/$REAL"
	home=$(j .workdir)
	mkdir -p "$home"
	printf 'real' >"$home/r.txt"
	api -q GET "/v1/workspaces/$REAL/files?path=r.txt"
	assert_status 200 "a real workspace's read afterwards"
	assert_eq real "$BODY" content
}

run_test "a well-formed answer is taken (positive control)" t_good
run_test "frames against the contract end in 502" t_hostile
run_test "a download broken after its headers is cut short" t_read_cut_short
run_test "the controller serves a real workspace afterwards" t_controller_fine
