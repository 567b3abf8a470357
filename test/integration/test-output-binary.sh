#!/bin/bash
# Output that is not UTF-8 text (NUL bytes, invalid sequences) is returned as base64, every
# part of it, and decodes to exactly the bytes the command wrote.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1

# decode FIELD FILE
decode() {
	jq -j ".$1" <<<"$BODY" | base64 -d >"$2"
}

t_nul_bytes() {
	run_cmd "$WS" "printf 'a\\000b\\377\\001'" || return 1
	assert_eq exited "$(j .status)" status
	assert_eq base64 "$(j .encoding)" encoding
	assert_eq 5 "$(j .stdoutBytes)" stdoutBytes
	printf 'a\000b\377\001' >"$TMP/expected"
	decode stdout "$TMP/got"
	assert_files_eq "$TMP/expected" "$TMP/got" "stdout bytes"
	assert_eq '' "$(j .stderr)" "empty stderr, base64"
}

t_invalid_utf8_on_stderr() {
	run_cmd "$WS" "printf 'text'; printf '\\303\\050' >&2" || return 1
	assert_eq base64 "$(j .encoding)" encoding
	assert_eq "$(printf text | base64)" "$(j .stdout)" "stdout is base64 too"
	printf '\303\050' >"$TMP/expected"
	decode stderr "$TMP/got"
	assert_files_eq "$TMP/expected" "$TMP/got" "stderr bytes"
}

t_all_byte_values() {
	# Every byte value 0-255, four times: 1024 bytes.
	local gen='i=0; while [ $i -lt 4 ]; do j=0; while [ $j -lt 256 ]; do printf "\\$(printf %o $j)"; j=$((j+1)); done; i=$((i+1)); done'
	run_cmd "$WS" "$gen" || return 1
	assert_eq base64 "$(j .encoding)" encoding
	assert_eq 1024 "$(j .stdoutBytes)" stdoutBytes
	sh -c "$gen" >"$TMP/expected"
	decode stdout "$TMP/got"
	assert_files_eq "$TMP/expected" "$TMP/got" "stdout bytes"
}

t_binary_truncated() {
	run_cmd "$WS" 'head -c 3000 /dev/urandom | tee "$HOME/sent"' '.maxOutputBytes = 1024' ||
		return 1
	assert_eq base64 "$(j .encoding)" encoding
	assert_eq true "$(j .truncated)" truncated
	assert_eq 3000 "$(j .stdoutBytes)" stdoutBytes
	api -q GET "/v1/workspaces/$WS"
	local sent
	sent="$(j .home)/sent"
	run_get "$WS" "$RUN"
	head -c 512 "$sent" >"$TMP/expected-head"
	tail -c 512 "$sent" >"$TMP/expected-tail"
	decode stdout "$TMP/got-head"
	decode stdoutTail "$TMP/got-tail"
	assert_files_eq "$TMP/expected-head" "$TMP/got-head" "head bytes"
	assert_files_eq "$TMP/expected-tail" "$TMP/got-tail" "tail bytes"
}

run_test "NUL bytes: base64, exact bytes" t_nul_bytes
run_test "invalid UTF-8 on stderr makes every part base64" t_invalid_utf8_on_stderr
run_test "all 256 byte values round-trip" t_all_byte_values
run_test "binary head and tail round-trip" t_binary_truncated
