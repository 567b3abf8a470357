#!/bin/bash
# Bounded output: per stream the first H and the last T bytes are kept (H = T = maxOutputBytes/2),
# counts are exact, and `truncated` says whether anything was dropped. Checked at the boundary
# H+T-1, H+T, H+T+1 and on 100 MB.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1

PATTERN='seq 1 1000000'

# expect_file N FILE: the first N bytes of the pattern.
expect_file() {
	$PATTERN | head -c "$1" >"$2"
}

# check_whole STREAM N: the stream is complete, with no tail.
check_whole() {
	local s=$1 n=$2
	expect_file "$n" "$TMP/expected"
	jq -j ".$s" <<<"$BODY" >"$TMP/got"
	assert_files_eq "$TMP/expected" "$TMP/got" "$s (all $n bytes)"
	assert_eq "$n" "$(j ".${s}Bytes")" "${s}Bytes"
	assert_eq false "$(j "has(\"${s}Tail\")")" "no ${s}Tail"
}

# check_cut STREAM N H T: head is the first H bytes, tail the last T.
check_cut() {
	local s=$1 n=$2 h=$3 t=$4
	expect_file "$n" "$TMP/all"
	head -c "$h" "$TMP/all" >"$TMP/expected-head"
	tail -c "$t" "$TMP/all" >"$TMP/expected-tail"
	jq -j ".$s" <<<"$BODY" >"$TMP/got-head"
	jq -j ".${s}Tail" <<<"$BODY" >"$TMP/got-tail"
	assert_files_eq "$TMP/expected-head" "$TMP/got-head" "$s head"
	assert_files_eq "$TMP/expected-tail" "$TMP/got-tail" "${s}Tail"
	assert_eq "$n" "$(j ".${s}Bytes")" "${s}Bytes"
}

# t_stdout N: maxOutputBytes 1024 (H = T = 512), N bytes on stdout.
t_stdout() {
	local n=$1
	run_cmd "$WS" "$PATTERN | head -c $n" '.maxOutputBytes = 1024' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq 1024 "$(j .maxOutputBytes)" maxOutputBytes
	assert_eq utf-8 "$(j .encoding)" encoding
	if ((n <= 1024)); then
		assert_eq false "$(j .truncated)" truncated
		check_whole stdout "$n"
	else
		assert_eq true "$(j .truncated)" truncated
		check_cut stdout "$n" 512 512
	fi
	assert_eq '' "$(j .stderr)" stderr
	assert_eq 0 "$(j .stderrBytes)" stderrBytes
}

# t_stderr N: the same on stderr.
t_stderr() {
	local n=$1
	run_cmd "$WS" "$PATTERN | head -c $n >&2" '.maxOutputBytes = 1024' || return 1
	assert_eq exited "$(j .status)" status
	if ((n <= 1024)); then
		assert_eq false "$(j .truncated)" truncated
		check_whole stderr "$n"
	else
		assert_eq true "$(j .truncated)" truncated
		check_cut stderr "$n" 512 512
	fi
	assert_eq 0 "$(j .stdoutBytes)" stdoutBytes
}

t_one_stream_truncated() {
	run_cmd "$WS" "$PATTERN | head -c 1000; $PATTERN | head -c 5000 >&2" '.maxOutputBytes = 1024' ||
		return 1
	assert_eq true "$(j .truncated)" truncated
	check_whole stdout 1000
	check_cut stderr 5000 512 512
}

t_small_limit() {
	run_cmd "$WS" 'printf abc' '.maxOutputBytes = 2' || return 1
	assert_eq true "$(j .truncated)" truncated
	assert_eq a "$(j .stdout)" "head (1 byte)"
	assert_eq c "$(j .stdoutTail)" "tail (1 byte)"
	assert_eq 3 "$(j .stdoutBytes)" stdoutBytes
}

t_default_limit() {
	run_cmd "$WS" 'true' || return 1
	assert_eq 131072 "$(j .maxOutputBytes)" "default maxOutputBytes"
}

t_yes_100mb() {
	run_cmd "$WS" 'yes | head -c 100000000' '.timeoutMs = 300000' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq 100000000 "$(j .stdoutBytes)" stdoutBytes
	assert_eq true "$(j .truncated)" truncated
	assert_eq utf-8 "$(j .encoding)" encoding
	yes | head -c 65536 >"$TMP/expected"
	jq -j .stdout <<<"$BODY" >"$TMP/got-head"
	jq -j .stdoutTail <<<"$BODY" >"$TMP/got-tail"
	assert_files_eq "$TMP/expected" "$TMP/got-head" "stdout head (64 KiB)"
	assert_files_eq "$TMP/expected" "$TMP/got-tail" "stdoutTail (64 KiB)"
}

for n in 1023 1024 1025; do
	run_test "stdout of $n bytes with maxOutputBytes 1024" t_stdout "$n"
done
for n in 1023 1024 1025; do
	run_test "stderr of $n bytes with maxOutputBytes 1024" t_stderr "$n"
done
run_test "one stream truncated marks the run truncated" t_one_stream_truncated
run_test "maxOutputBytes 2 keeps one byte each end" t_small_limit
run_test "default maxOutputBytes is 131072" t_default_limit
run_test "100 MB of yes: counted, head and tail exact" t_yes_100mb
