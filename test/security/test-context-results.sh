#!/bin/bash
# Attack: a code context's result.json is written by the sandbox's user (it owns
# $HOME/.station/contexts/<cid>), and the controller reads one per cell. A kernel program that
# writes hostile results (--kernel-dir names a fake one this script writes) gives, for each,
# a cell with a clear status and never a hang nor a host file read:
#   20 MiB of JSON, a 100 MB MIME value (over the 16 MiB bound) -> error ResultUnreadable;
#   malformed JSON, arrays nested 100000 deep, executionCount 2^63, an unknown status,
#   results that are no array -> error ResultInvalid;
#   result.json a symlink to a host file (/etc/shadow, and a file of this script's holding a
#   well-formed result with a marker), or a FIFO -> error ResultUnreadable, the marker nowhere;
#   6 MiB MIME values -> cut (text) or dropped (image), the result truncated and counted;
#   a non-string value for a non-JSON MIME type -> dropped and counted, application/json kept.
# Positive control: a well-formed result is recorded as written, and the controller answers
# at once after all of them.
. "$(dirname "$0")/../integration/lib.sh"

KDIR=$TMP/fake-kernels
mkdir -p "$KDIR"
chmod 0755 "$TMP" "$KDIR"
cat >"$KDIR/station-kernel-python" <<'EOF'
#!/bin/bash
# A hostile kernel: serve idles; exec N writes the result.json its cell's code names.
set -u
case $1 in
serve)
	mkdir -p "$2/cells"
	exec sleep 100000
	;;
interrupt) exit 0 ;;
exec) ;;
*) exit 2 ;;
esac
d=$2 n=$3
mkdir -p "$d/cells/$n"
r=$d/cells/$n/result.json
if [[ $n == 0 ]]; then
	echo '{"status":"ok","executionCount":null,"results":[],"error":null}' >"$r"
	exit 0
fi
code=$(cat "$d/cells/$n/code")
py() { /usr/bin/python3 -c "$1" >"$r"; }
case $code in
good) echo '{"status":"ok","executionCount":7,"results":[{"type":"execute_result","data":{"text/plain":"42"}}],"error":null}' >"$r" ;;
huge) py 'import sys; sys.stdout.write("{\"status\":\"ok\",\"pad\":\"" + "a" * (20 << 20) + "\"}")' ;;
mime100) py 'import sys; sys.stdout.write("{\"status\":\"ok\",\"results\":[{\"type\":\"display_data\",\"data\":{\"text/plain\":\"" + "a" * 100000000 + "\"}}]}")' ;;
malformed) printf '{"status":"ok","results":[' >"$r" ;;
nested) py 'import sys; sys.stdout.write("{\"status\":\"ok\",\"x\":" + "[" * 100000 + "]" * 100000 + "}")' ;;
count63) echo '{"status":"ok","executionCount":9223372036854775808,"results":[]}' >"$r" ;;
status) echo '{"status":"pwned","results":[]}' >"$r" ;;
notarray) echo '{"status":"ok","results":{"type":"execute_result"}}' >"$r" ;;
symlink:*) ln -sfn "${code#symlink:}" "$r" ;;
fifo) rm -f "$r"; mkfifo "$r" ;;
mime6) py 'import json, sys; big = "b" * (6 << 20); json.dump({"status": "ok", "results": [{"type": "display_data", "data": {"text/plain": big, "image/png": big}}]}, sys.stdout)' ;;
nonstring) echo '{"status":"ok","results":[{"type":"display_data","data":{"image/png":{"a":1},"text/plain":5,"application/json":{"k":[1,2]}}}]}' >"$r" ;;
esac
exit 0
EOF
chmod 0755 "$KDIR/station-kernel-python"
# what a symlink at result.json points at: a well-formed result, marked
HOST_FILE=$TMP/host-result.json
echo '{"status":"ok","results":[{"type":"execute_result","data":{"text/plain":"HOST-FILE-MARKER"}}]}' >"$HOST_FILE"

require_controller --kernel-dir "$KDIR"
new_ws WS || exit 1
api -q POST "/v1/workspaces/$WS/contexts" '{"language":"python"}'
[[ $STATUS == 201 ]] || {
	not_ok "a context on the fake kernel" "HTTP $STATUS $(_short "$BODY")"
	exit 1
}
CTX=$(j .id)

# cell CODE: executes it and waits (60 s); BODY is the execution, which must have ended.
cell() {
	local body t0=$SECONDS
	body=$(jq -nc --arg c "$1" '{code: $c, timeoutMs: 30000}')
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/execute?waitMs=60000" "$body"
	assert_eq 201 "$STATUS" "execute $1: $(_short "$BODY")" || return 1
	[[ $(j .status) != running ]] || {
		_fail "$1: still running after $((SECONDS - t0)) s"
		return 1
	}
	[[ $BODY != *HOST-FILE-MARKER* ]] || _fail "$1: the host file's content is in the execution"
}

# refused CODE NAME: the cell ends with status error and error.name NAME.
refused() {
	cell "$1" || return 1
	assert_eq "error $2" "$(j '"\(.status) \(.error.name)"')" "$1: $(_short "$(j .error.value)")" || return 1
	assert_eq 0 "$(j '.results | length')" "$1: no results kept"
}

t_good() {
	cell good || return 1
	assert_eq "ok 7 42 false" "$(j '"\(.status) \(.executionCount) \(.results[0].data["text/plain"]) \(.results[0].truncated)"')" \
		"the well-formed result as written"
}

t_huge() { refused huge ResultUnreadable; }
t_mime100() { refused mime100 ResultUnreadable; }
t_malformed() { refused malformed ResultInvalid; }
t_nested() { refused nested ResultInvalid; }
t_count63() { refused count63 ResultInvalid; }
t_status() { refused status ResultInvalid; }
t_notarray() { refused notarray ResultInvalid; }
t_shadow() { refused symlink:/etc/shadow ResultUnreadable; }
t_host_file() { refused "symlink:$HOST_FILE" ResultUnreadable; }
t_fifo() { refused fifo ResultUnreadable; }

t_mime6() {
	cell mime6 || return 1
	assert_eq "ok true" "$(j '"\(.status) \(.results[0].truncated)"')" "the result is truncated" || return 1
	assert_eq null "$(j '.results[0].data["image/png"]')" "the 6 MiB image dropped" || return 1
	local kept omitted
	kept=$(j '.results[0].data["text/plain"] | length')
	omitted=$(j '.results[0].omittedBytes')
	((kept > 0 && kept < (6 << 20))) || _fail "text/plain kept $kept bytes"
	assert_eq $((2 * (6 << 20) - kept)) "$omitted" "omittedBytes counts what was left out"
}

t_nonstring() {
	cell nonstring || return 1
	assert_eq 'ok true {"application/json":{"k":[1,2]}}' \
		"$(j '"\(.status) \(.results[0].truncated) \(.results[0].data | tojson)"')" \
		"non-string values of non-JSON types dropped, application/json kept"
}

t_after() {
	local t0=${EPOCHREALTIME/./}
	api -q GET /v1/ready
	assert_eq 200 "$STATUS" "the controller answers" || return 1
	local ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
	((ms < 5000)) || _fail "GET /v1/ready took $ms ms"
	api -q GET "/v1/workspaces/$WS/contexts/$CTX/executions"
	assert_eq 200 "$STATUS" "executions listed" || return 1
	[[ $BODY != *HOST-FILE-MARKER* ]] || _fail "the host file's content is in the executions"
	cell good || return 1
	assert_eq "ok 42" "$(j '"\(.status) \(.results[0].data["text/plain"])"')" "a good cell after all of them"
}

run_test "context result: a well-formed result is recorded (positive control)" t_good
run_test "context result: 20 MiB of JSON is unreadable" t_huge
run_test "context result: a 100 MB MIME value is unreadable" t_mime100
run_test "context result: malformed JSON is invalid" t_malformed
run_test "context result: arrays nested 100000 deep are invalid" t_nested
run_test "context result: executionCount 2^63 is invalid" t_count63
run_test "context result: an unknown status is invalid" t_status
run_test "context result: results that are no array are invalid" t_notarray
run_test "context result: a symlink to /etc/shadow is not followed" t_shadow
run_test "context result: a symlink to a host file's result is not followed" t_host_file
run_test "context result: a FIFO does not hang the controller" t_fifo
run_test "context result: 6 MiB MIME values are cut or dropped and counted" t_mime6
run_test "context result: non-string values of non-JSON types are dropped" t_nonstring
run_test "context result: the controller answers at once afterwards" t_after
exit $((_n_fail > 0))
