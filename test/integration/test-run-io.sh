#!/bin/bash
# What a command gets (cwd, environment, stdin) and what it gives back (both output streams).
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS '{"env":{"WS_VAR":"from-workspace","SHARED":"workspace"}}' || exit 1
api -q GET "/v1/workspaces/$WS"
WORKDIR=$(j .workdir)
HOME_DIR=$(j .home)

t_both_streams() {
	run_cmd "$WS" 'echo hi; echo err >&2; exit 3' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 3 "$(j .exitCode)" exitCode
	assert_eq '"hi\n"' "$(j '.stdout | tojson')" stdout
	assert_eq '"err\n"' "$(j '.stderr | tojson')" stderr
	assert_eq 3 "$(j .stdoutBytes)" stdoutBytes
	assert_eq 4 "$(j .stderrBytes)" stderrBytes
	assert_eq false "$(j .truncated)" truncated
	assert_eq utf-8 "$(j .encoding)" encoding
	assert_eq false "$(j 'has("stdoutTail") or has("stderrTail")')" "no tails"
}

t_utf8_text() {
	run_cmd "$WS" "printf 'héllo ✓\n'" || return 1
	assert_eq utf-8 "$(j .encoding)" encoding
	assert_eq '"héllo ✓\n"' "$(j '.stdout | tojson')" stdout
	assert_eq "$(printf 'héllo ✓\n' | wc -c)" "$(j .stdoutBytes)" stdoutBytes
}

t_default_cwd() {
	run_cmd "$WS" 'pwd' || return 1
	assert_eq "$WORKDIR" "$(j .stdout | tr -d '\n')" "default cwd"
	assert_eq exited "$(j .status)" status
}

t_relative_cwd() {
	run_cmd "$WS" 'mkdir -p sub/dir' || return 1
	run_cmd "$WS" 'pwd' '.cwd = "sub/dir"' || return 1
	assert_eq "$WORKDIR/sub/dir" "$(j .stdout | tr -d '\n')" "relative cwd"
	assert_eq sub/dir "$(j .cwd)" "cwd field"
}

t_absolute_cwd() {
	run_cmd "$WS" 'pwd' '.cwd = "/tmp"' || return 1
	assert_eq /tmp "$(j .stdout | tr -d '\n')" "absolute cwd"
}

t_environment() {
	run_cmd "$WS" 'echo "$HOME|$PWD|$WS_VAR|$SHARED|$RUN_VAR"; test -n "$PATH"' \
		'.env = {"RUN_VAR": "from-run", "SHARED": "run"}' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" "PATH is set"
	assert_eq "$HOME_DIR|$WORKDIR|from-workspace|run|from-run" "$(j .stdout | tr -d '\n')" env
}

t_environment_is_clean() {
	# Exactly PATH, HOME, PWD, the credential helper's socket (a path, no secret) and the
	# workspace's and run's env: nothing of the controller's.
	run_cmd "$WS" 'env | cut -d= -f1 | sort | tr "\n" " "' || return 1
	assert_eq 'HOME PATH PWD SHARED STATION_CREDENTIAL_SOCKET WS_VAR ' "$(j .stdout)" \
		"environment names"
}

t_stdin_text() {
	run_cmd "$WS" 'cat; echo; wc -c </dev/null' '.stdin = "line one\nline two"' || return 1
	assert_eq '"line one\nline two\n0\n"' "$(j '.stdout | tojson')" stdout
}

t_stdin_base64() {
	local b64
	b64=$(printf 'a\000b\377' | base64)
	run_cmd "$WS" 'od -An -tx1 | tr -s " \n" " "' ".stdin = \"$b64\" | .stdinEncoding = \"base64\"" || return 1
	assert_eq ' 61 00 62 ff ' "$(j .stdout)" "stdin bytes"
}

t_no_stdin() {
	run_cmd "$WS" 'cat; echo "rc=$?"' || return 1
	assert_eq '"rc=0\n"' "$(j '.stdout | tojson')" "stdin is empty"
}

t_home_persists_between_runs() {
	run_cmd "$WS" 'echo kept > "$HOME/marker"' || return 1
	run_cmd "$WS" 'cat "$HOME/marker"' || return 1
	assert_eq '"kept\n"' "$(j '.stdout | tojson')" "file in HOME"
	assert_eq kept "$(cat "$HOME_DIR/marker" 2>/dev/null)" "file on the host"
}

run_test "stdout and stderr captured, exit 3" t_both_streams
run_test "utf-8 output kept as text" t_utf8_text
run_test "default cwd is the workspace directory" t_default_cwd
run_test "relative cwd" t_relative_cwd
run_test "absolute cwd" t_absolute_cwd
run_test "environment: HOME, PWD, workspace env, run env" t_environment
run_test "environment has nothing of the controller's" t_environment_is_clean
run_test "stdin as text" t_stdin_text
run_test "stdin as base64" t_stdin_base64
run_test "no stdin reads EOF" t_no_stdin
run_test "HOME persists between runs" t_home_persists_between_runs
