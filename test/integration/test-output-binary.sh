#!/bin/bash
# Output that is not UTF-8 text (NUL bytes, invalid sequences) is returned as base64, every
# part of it, and decodes to exactly the bytes the command wrote. Output that is UTF-8 as
# written stays text when a head/tail cut falls inside a character: the cut moves to the
# character's boundary, and the byte counts stay exact.
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

# fill N CHAR: a shell command printing N times the ASCII letter CHAR.
fill() {
	echo "head -c $1 /dev/zero | tr '\\000' $2"
}

# A character of LEN bytes (octal escapes for printf) with K of them before the cut.
CHARS=('\303\251 2' '\342\202\254 3' '\360\237\230\200 4')

# t_utf8_whole CHAR LEN K [STREAM]: not truncated (default maxOutputBytes: the head is 65,536
# bytes), with the character across byte 65,536: the whole stream comes back as text.
t_utf8_whole() {
	local ch=$1 len=$2 k=$3 s=${4:-stdout} redir=
	[[ $s == stderr ]] && redir='>&2'
	local gen="{ $(fill $((65536 - k)) a); printf '$ch'; $(fill 100 b); } $redir"
	run_cmd "$WS" "$gen" || return 1
	sh -c "$gen" >"$TMP/expected" 2>&1
	assert_eq utf-8 "$(j .encoding)" encoding
	assert_eq false "$(j .truncated)" truncated
	assert_eq $((65536 - k + len + 100)) "$(j ".${s}Bytes")" "${s}Bytes"
	jq -j ".$s" <<<"$BODY" >"$TMP/got"
	assert_files_eq "$TMP/expected" "$TMP/got" "$s (whole)"
}

# t_utf8_cut CHAR LEN K: maxOutputBytes 1024 (H = T = 512), a character across the head's end
# (K bytes in the head) and one across the tail's start (K bytes before it): the head ends
# before the first, the tail begins after the second, the count is every byte.
t_utf8_cut() {
	local ch=$1 len=$2 k=$3
	local tail_kept=$((512 - (len - k)))
	local gen="$(fill $((512 - k)) a); printf '$ch'; $(fill 2000 b); printf '$ch'; $(fill $tail_kept c)"
	run_cmd "$WS" "$gen" '.maxOutputBytes = 1024' || return 1
	local total=$((512 - k + len + 2000 + len + tail_kept))
	assert_eq utf-8 "$(j .encoding)" encoding
	assert_eq true "$(j .truncated)" truncated
	assert_eq "$total" "$(j .stdoutBytes)" stdoutBytes
	sh -c "$(fill $((512 - k)) a)" >"$TMP/expected-head"
	sh -c "$(fill $tail_kept c)" >"$TMP/expected-tail"
	jq -j .stdout <<<"$BODY" >"$TMP/got-head"
	jq -j .stdoutTail <<<"$BODY" >"$TMP/got-tail"
	assert_files_eq "$TMP/expected-head" "$TMP/got-head" "head, up to the character"
	assert_files_eq "$TMP/expected-tail" "$TMP/got-tail" "tail, from after the character"
}

# t_invalid_at_cut GEN JQ-EXPR: really invalid UTF-8 at a cut stays base64,
# every kept byte shown.
t_invalid_at_cut() {
	local gen=$1 limit=$2
	run_cmd "$WS" "$gen" "$limit" || return 1
	assert_eq base64 "$(j .encoding)" encoding
	sh -c "$gen" >"$TMP/all"
	if [[ $(j .truncated) == true ]]; then
		head -c 512 "$TMP/all" >"$TMP/expected-head"
		tail -c 512 "$TMP/all" >"$TMP/expected-tail"
		decode stdout "$TMP/got-head"
		decode stdoutTail "$TMP/got-tail"
		assert_files_eq "$TMP/expected-head" "$TMP/got-head" "head bytes"
		assert_files_eq "$TMP/expected-tail" "$TMP/got-tail" "tail bytes"
	else
		decode stdout "$TMP/got"
		assert_files_eq "$TMP/all" "$TMP/got" "stdout bytes"
	fi
}

# A service attempt's output follows the same rule.
t_utf8_service() {
	local gen="$(fill 65535 a); printf '\303\251'; $(fill 100 b)"
	api -q POST "/v1/workspaces/$WS/services" "$(jq -nc --arg c "$gen" '{name:"utf8",command:$c}')"
	assert_status 201 "start service" || return 1
	svc_ended() {
		api -q GET "/v1/workspaces/$WS/services/utf8"
		[[ $(j '.attempts[-1].state') == ended ]]
	}
	wait_for -t 60 svc_ended || {
		_fail "attempt not ended: $(_short "$BODY")"
		return 1
	}
	sh -c "$gen" >"$TMP/expected"
	assert_eq utf-8 "$(j '.attempts[-1].encoding')" "attempt encoding"
	assert_eq 65637 "$(j '.attempts[-1].stdoutBytes')" "attempt stdoutBytes"
	jq -j '.attempts[-1].stdout' <<<"$BODY" >"$TMP/got"
	assert_files_eq "$TMP/expected" "$TMP/got" "attempt stdout"
	api -q DELETE "/v1/workspaces/$WS/services/utf8"
}

for c in "${CHARS[@]}"; do
	read -r ch len <<<"$c"
	for ((k = 1; k < len; k++)); do
		run_test "$len-byte character $k/$len into the 65,536-byte head, not truncated: text" \
			t_utf8_whole "$ch" "$len" "$k"
		run_test "$len-byte character $k/$len at both cuts, truncated: text, cut moved" \
			t_utf8_cut "$ch" "$len" "$k"
	done
done
run_test "the same on stderr" t_utf8_whole '\303\251' 2 1 stderr
run_test "a service attempt's output across the head: text" t_utf8_service
run_test "control: an incomplete character followed by ASCII, not truncated: base64" \
	t_invalid_at_cut "$(fill 65535 a); printf '\303'; $(fill 100 b)" .
run_test "control: a head ending in an impossible prefix (E0 80): base64" \
	t_invalid_at_cut "$(fill 510 a); printf '\340\200'; $(fill 2000 b)" '.maxOutputBytes = 1024'
run_test "control: a tail starting with 4 continuation bytes: base64" \
	t_invalid_at_cut "$(fill 2000 a); printf '\200\200\200\200'; $(fill 508 c)" \
	'.maxOutputBytes = 1024'
run_test "NUL bytes: base64, exact bytes" t_nul_bytes
run_test "invalid UTF-8 on stderr makes every part base64" t_invalid_utf8_on_stderr
run_test "all 256 byte values round-trip" t_all_byte_values
run_test "binary head and tail round-trip" t_binary_truncated
