#!/bin/bash
# run-all: not under sanitizers: reads --help output and the README only
# The README's CLI summary names every option of `create` that `station-sandbox create --help`
# lists, and every command `station-sandbox --help` lists.
. "$(dirname "$0")/lib.sh"

t_create_flags() {
	local usage summary flag missing=()
	usage=$("$CLI_BIN" create --help 2>&1 | head -n 1)
	assert_match '^usage: station-sandbox create ' "$usage" "create --help" || return 1
	# The README's line that starts the create summary.
	summary=$(grep -m 1 '^`create \[' "$SRC/README.md")
	assert_match '.' "$summary" "the README's create summary line" || return 1
	for flag in $(grep -oE -- '--[a-z][a-z-]*' <<<"$usage" | sort -u); do
		[[ $flag == --help ]] && continue
		grep -qF -- "[$flag" <<<"$summary" || missing+=("$flag")
	done
	assert_eq "" "${missing[*]}" "create options missing from the README's CLI summary"
	# The control: the flags were found at all.
	assert_le 10 "$(grep -oE -- '--[a-z][a-z-]*' <<<"$usage" | sort -u | wc -l)" "options in create --help"
}
run_test "README lists every create option" t_create_flags
