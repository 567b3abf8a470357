#!/bin/bash
# Every kind of bad request gets its documented status and error code (docs/api.md "Errors"),
# each next to a positive control that the same endpoint accepts a good request.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1
CMDS=/v1/workspaces/$WS/commands

# expect_error STATUS CODE [FIELD]: the last response is that error.
expect_error() {
	assert_status "$1" || return 1
	assert_eq "$2" "$(j .error.code)" "error code"
	assert_match '.' "$(j '.error.message // empty')" "error message"
	if [[ -n ${3:-} ]]; then
		assert_eq "$3" "$(j '.error.field // empty')" "error field"
		assert_contains "$3" "$(j .error.message)" "error message names the field"
	fi
}

t_positive_control() {
	api -q POST "$CMDS?waitMs=60000" '{"command":"echo ok","timeoutMs":5000,"maxOutputBytes":1024}'
	assert_status 201 "a good request" || return 1
	assert_eq '"ok\n"' "$(j '.stdout | tojson')" stdout
}

t_malformed() {
	api -q POST "$CMDS" '{"command":'
	expect_error 400 invalid_argument
}

t_trailing_garbage() {
	api -q POST "$CMDS" '{"command":"true"} x'
	expect_error 400 invalid_argument
}

t_not_an_object() {
	api -q POST "$CMDS" '["true"]'
	expect_error 400 invalid_argument
}

t_duplicate_key() {
	api -q POST "$CMDS" '{"command":"true","command":"false"}'
	expect_error 400 invalid_argument
	assert_contains command "$(j .error.message)" "message names the duplicated key"
}

t_unknown_field() {
	api -q POST "$CMDS" '{"command":"true","bogusField":1}'
	expect_error 400 invalid_argument
	assert_contains bogusField "$(j .error.message)" "message names the unknown field"
}

t_wrong_type() {
	api -q POST "$CMDS" '{"command":"true","timeoutMs":"500"}'
	expect_error 400 invalid_argument timeoutMs
	api -q POST "$CMDS" '{"command":42}'
	expect_error 400 invalid_argument command
	api -q POST "$CMDS" '{"command":"true","env":{"A":1}}'
	expect_error 400 invalid_argument env
}

t_out_of_range() {
	api -q POST "$CMDS" '{"command":"true","timeoutMs":0}'
	expect_error 400 invalid_argument timeoutMs
	api -q POST "$CMDS" '{"command":"true","timeoutMs":86400001}'
	expect_error 400 invalid_argument timeoutMs
	api -q POST "$CMDS" '{"command":"true","maxOutputBytes":1023}'
	expect_error 400 invalid_argument maxOutputBytes
	api -q POST "$CMDS" '{"command":"true","maxOutputBytes":8388610}'
	expect_error 400 invalid_argument maxOutputBytes
	api -q POST "$CMDS" '{"command":""}'
	expect_error 400 invalid_argument command
	api -q POST "$CMDS" '{}'
	expect_error 400 invalid_argument command
	api -q POST "$CMDS" '{"command":"true","env":{"1BAD":"x"}}'
	expect_error 400 invalid_argument env
	# Positive control at the edges of the ranges.
	api -q POST "$CMDS?waitMs=60000" '{"command":"true","timeoutMs":1,"maxOutputBytes":2}'
	assert_status 201 "timeoutMs 1, maxOutputBytes 2"
	api -q POST "$CMDS?waitMs=60000" '{"command":"true","timeoutMs":86400000,"maxOutputBytes":8388608}'
	assert_status 201 "timeoutMs 86400000, maxOutputBytes 8388608"
}

t_bad_query() {
	api -q GET "$CMDS?limit=0"
	expect_error 400 invalid_argument
	api -q GET "$CMDS?limit=abc"
	expect_error 400 invalid_argument
	api -q GET "$CMDS?limit=1"
	assert_status 200 "limit=1"
}

t_huge_body() {
	# 3 MiB, over the 2 MiB cap; the same shape under the cap is accepted.
	{
		printf '{"command":"true","stdin":"'
		head -c $((3 * 1024 * 1024)) /dev/zero | tr '\0' a
		printf '"}'
	} >"$TMP/huge.json"
	api -q POST "$CMDS" "@$TMP/huge.json"
	expect_error 413 payload_too_large
	{
		printf '{"command":"wc -c","stdin":"'
		head -c $((1024 * 1024)) /dev/zero | tr '\0' a
		printf '"}'
	} >"$TMP/big.json"
	api -q POST "$CMDS?waitMs=60000" "@$TMP/big.json"
	assert_status 201 "1 MiB of stdin" || return 1
	assert_eq 1048576 "$(j .stdout | tr -d ' \n')" "stdin bytes seen by the command"
}

t_wrong_content_type() {
	STATUS=$(curl -sS --unix-socket "$SOCK" -o "$TMP/body" -w '%{http_code}' -X POST \
		-H 'Content-Type: text/plain' --data-binary '{"command":"true"}' "http://station$CMDS")
	BODY=$(cat "$TMP/body")
	expect_error 415 unsupported_media_type
}

t_not_found() {
	api -q GET /v1/workspaces/test-aaaaaaaaaaaaaaaaaaaaaaaaaa
	expect_error 404 not_found
	api -q POST /v1/workspaces/test-aaaaaaaaaaaaaaaaaaaaaaaaaa/commands '{"command":"true"}'
	expect_error 404 not_found
	api -q GET "$CMDS/r-aaaaaaaaaaaaaaaaaaaaaaaaaa"
	expect_error 404 not_found
	api -q POST "$CMDS/r-aaaaaaaaaaaaaaaaaaaaaaaaaa/cancel"
	expect_error 404 not_found
	api -q DELETE /v1/workspaces/test-aaaaaaaaaaaaaaaaaaaaaaaaaa
	expect_error 404 not_found
	api -q GET /v1/nothing-here
	expect_error 404 not_found
	api -q GET "/v1/workspaces/$WS"
	assert_status 200 "the real workspace"
}

t_wrong_method() {
	local headers
	headers=$(curl -sS --unix-socket "$SOCK" -o "$TMP/body" -D - -X DELETE http://station/v1/ready)
	STATUS=$(awk 'NR == 1 {print $2}' <<<"$headers")
	BODY=$(cat "$TMP/body")
	expect_error 405 method_not_allowed
	assert_match 'GET' "$(grep -i '^allow:' <<<"$headers" | tr -d '\r')" "Allow header lists GET"
}

# What the API layer refuses before the manager sees a network request.
t_network_requests() {
	local headers
	api -q PUT "/v1/workspaces/$WS/network" '{"egress":[]}'
	expect_error 400 invalid_argument egress
	api -q PUT "/v1/workspaces/$WS/network" '{}'
	expect_error 400 invalid_argument egress
	assert_contains 'field "egress" is required' "$(j .error.message)" "message"
	api -q PUT "/v1/workspaces/$WS/network" '{"egress":{},"mode":"bridge"}'
	expect_error 400 invalid_argument mode
	headers=$(curl -sS --unix-socket "$SOCK" -o "$TMP/body" -D - -X POST "http://station/v1/workspaces/$WS/network")
	STATUS=$(awk 'NR == 1 {print $2}' <<<"$headers")
	BODY=$(cat "$TMP/body")
	expect_error 405 method_not_allowed
	assert_eq 'Allow: GET, HEAD, PUT' "$(grep -i '^allow:' <<<"$headers" | tr -d '\r')" "Allow header"
	# positive control: a well-formed PUT reaches the manager (whatever it answers, it is not
	# the API layer's 400)
	api -q PUT "/v1/workspaces/$WS/network" '{"egress":{"allow":[]}}'
	assert_ne 400 "$STATUS" "a well-formed body is not refused by the API layer"
}

t_conflict() {
	run_cmd "$WS" 'true' || return 1
	api -q POST "$CMDS/$RUN/cancel"
	expect_error 409 conflict
}

t_workspace_create_errors() {
	# a container workspace names its image (this worker has no default image)
	api -q POST /v1/workspaces '{"adapter":"container"}'
	expect_error 400 invalid_argument image
	api -q POST /v1/workspaces '{"adapter":"vm"}'
	expect_error 400 invalid_argument adapter
	api -q POST /v1/workspaces '{"image":"busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000"}'
	expect_error 400 invalid_argument image
	api -q POST /v1/workspaces '{"network":"none"}'
	expect_error 400 invalid_argument network
	api -q POST /v1/workspaces '{"network":"host"}'
	expect_error 400 invalid_argument network
	assert_contains '"none", "bridge" and "restricted"' "$(j .error.message)" "message lists the modes"
	api -q POST /v1/workspaces '{"network":"bridge","egress":{"allow":[]}}'
	expect_error 400 invalid_argument egress
	assert_contains 'needs network "restricted"' "$(j .error.message)" "message says which mode"
	api -q POST /v1/workspaces '{"adapter":"container","network":"restricted","egress":[]}'
	expect_error 400 invalid_argument egress
	api -q POST /v1/workspaces '{"cpus":-1}'
	expect_error 400 invalid_argument cpus
	api -q POST /v1/workspaces '{"pidsLimit":"x"}'
	expect_error 400 invalid_argument pidsLimit
	api -q POST /v1/workspaces '{"nope":true}'
	expect_error 400 invalid_argument
	assert_contains nope "$(j .error.message)" "message names the unknown field"
	api -q POST /v1/workspaces '{"env":{"A":"1","A":"2"}}'
	expect_error 400 invalid_argument
	local ws
	new_ws ws '{"adapter":"host","env":{"A":"1"}}' || return 1
	assert_eq '{"A":"[redacted]"}' "$(j .env)" "env: the names, never the values"
}

t_workspace_limits() {
	local ws
	new_ws ws '{"cpus":1.5,"memoryMb":512,"pidsLimit":64}' || return 1
	assert_eq 1.5 "$(j .cpus)" cpus
	assert_eq 512 "$(j .memoryMb)" memoryMb
	assert_eq 64 "$(j .pidsLimit)" pidsLimit
}

run_test "positive control: a good command request" t_positive_control
run_test "malformed JSON is 400" t_malformed
run_test "trailing garbage is 400" t_trailing_garbage
run_test "a non-object body is 400" t_not_an_object
run_test "duplicate key is 400" t_duplicate_key
run_test "unknown field is 400 naming it" t_unknown_field
run_test "wrong type is 400 naming the field" t_wrong_type
run_test "out-of-range values are 400 naming the field" t_out_of_range
run_test "bad query parameter is 400" t_bad_query
run_test "body over 2 MiB is 413" t_huge_body
run_test "non-JSON content type is 415" t_wrong_content_type
run_test "unknown workspace, run or path is 404" t_not_found
run_test "wrong method is 405 with Allow" t_wrong_method
run_test "network: the API layer's refusals" t_network_requests
run_test "cancel of a finished run is 409" t_conflict
run_test "workspace create validation" t_workspace_create_errors
run_test "workspace limits accepted and reported" t_workspace_limits
