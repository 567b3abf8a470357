#!/bin/bash
# run-all: not under sanitizers: a Python script on the source tree; no C of ours runs
# scripts/check-layers: the tree passes; a copy of it passes (the positive control for every
# planted violation below); each upward or sideways include planted into a copy fails, naming
# the file, the line and the arrow. Needs no controller.
. "$(dirname "$0")/lib.sh"

CHECK=$SRC/scripts/check-layers
OUT=

# copy_tree NAME: a fresh copy of src/ and include/ in $TMP/NAME.
copy_tree() {
	mkdir -p "$TMP/$1" && cp -r "$SRC/src" "$SRC/include" "$TMP/$1/"
}

# check TREE: runs the script on TREE; its output in OUT, its exit status returned.
check() {
	OUT=$("$CHECK" "$1" 2>&1)
}

t_tree_passes() {
	check "$SRC"
	assert_eq 0 "$?" "exit status on the tree: $OUT"
}

t_copy_passes() {
	copy_tree clean || return 1
	check "$TMP/clean"
	assert_eq 0 "$?" "exit status on an unchanged copy: $OUT"
}

# planted NAME FILE INCLUDE EXPECTED: appends `#include "INCLUDE"` to FILE (under src/) in a copy;
# the script must fail and report FILE at that line with EXPECTED after it.
planted() {
	local name=$1 file=src/$2 inc=$3 want=$4 line
	copy_tree "$name" || return 1
	echo "#include \"$inc\"" >>"$TMP/$name/$file"
	line=$(wc -l <"$TMP/$name/$file")
	check "$TMP/$name"
	assert_eq 1 "$?" "exit status with $file including $inc" || return 1
	assert_contains "$file:$line: $want" "$OUT" "report"
	assert_eq 1 "$(grep -c "^src/" <<<"$OUT")" "violations reported"
}

t_store_includes_daemon() {
	planted store-up store/store.c daemon/manager.h 'store -> daemon ("daemon/manager.h")'
}

t_client_includes_api() {
	planted client-up client/terminal.c api/ws-conn.h 'client -> api ("api/ws-conn.h")'
}

t_agent_includes_store() {
	planted agent-side agent/main.c store/store.h 'agent -> store ("store/store.h")'
}

t_daemon_includes_adapter_internals() {
	planted adapter-internal daemon/manager.c adapter/runtime.h \
		'daemon -> adapter ("adapter/runtime.h"): adapter is reached through adapter.h only'
}

t_daemon_includes_cgroup_internals() {
	planted cgroup-internal daemon/manager.c cgroup/cgroup-internal.h \
		'daemon -> cgroup ("cgroup/cgroup-internal.h")'
}

t_cli_includes_basic_functions() {
	planted cli-basic cli/output.c basic/util.h 'cli -> basic ("basic/util.h")'
}

t_missing_header() {
	planted missing daemon/manager.c basic/no-such.h '"basic/no-such.h" does not exist'
}

run_test tree-passes t_tree_passes
run_test copy-passes t_copy_passes
run_test store-includes-daemon t_store_includes_daemon
run_test client-includes-api t_client_includes_api
run_test agent-includes-store t_agent_includes_store
run_test daemon-includes-adapter-internals t_daemon_includes_adapter_internals
run_test daemon-includes-cgroup-internals t_daemon_includes_cgroup_internals
run_test cli-includes-basic-functions t_cli_includes_basic_functions
run_test missing-header t_missing_header
