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

# memoryMb and pidsLimit 0 (or absent) in a create mean the worker's defaults (docs/api.md), not
# "unlimited": a line about either limit, or the doc comment just above one, that says unlimited
# is wrong, unless it is about the limit in force that a workspace reports (0 there is
# unlimited, given by a worker whose default is 0): "in force" in the docs, ws.memoryMb and
# ws.pidsLimit shown by the dashboard.
limit_lines_unlimited() {
	grep -rHn -B1 -E 'memoryMb|memory-mb|memory limit|pidsLimit|pids-limit|process limit|new-memory|new-pids' "$@" |
		grep -E '^[^:]+:[0-9]+:|^[^:]+-[0-9]+-[[:space:]]*(/\*\*|//|#)' | grep -E 'unlimited' |
		grep -vE 'in force|operator set that default|ws\.(memoryMb|pidsLimit) \?'
}

t_limits_default_not_unlimited() {
	local found
	found=$(cd "$SRC" && limit_lines_unlimited README.md src/cli sdk/typescript/src \
		sdk/typescript/README.md web docs)
	assert_eq "" "$found" "lines saying memoryMb or pidsLimit 0 is unlimited"
	found=$("$CLI_BIN" create --help 2>&1)
	assert_match "--memory-mb N +memory limit in MiB \\(0: the worker's default\\)" "$found" \
		"create --help: --memory-mb 0"
	assert_match "--pids-limit N +process limit \\(0: the worker's default\\)" "$found" \
		"create --help: --pids-limit 0"
	# The control: the search finds the phrase it must not.
	printf '%s\n' '  /** Memory limit in MiB; 0 or absent: unlimited. */' '  memoryMb?: number;' \
		'x --pids-limit N (0: unlimited)' >"$TMP/wrong.ts"
	assert_eq 2 "$(limit_lines_unlimited "$TMP/wrong.ts" | wc -l)" "the search finds both wrong lines"
}
run_test "memoryMb and pidsLimit 0: the worker's default, everywhere it is said" \
	t_limits_default_not_unlimited
