#!/bin/bash
# station-sandbox files and secret, and the client library underneath (client-files-check), as
# a user runs them against a real controller: each subcommand's exact output and exit status,
# the API's refusals as messages, a large file through get/put byte for byte (and the CLI's
# memory bounded meanwhile), watch lines, and a secret's value only ever on stdin.
. "$(dirname "$0")/lib.sh"

CHECK=$BUILD/test/helpers/client-files-check

require_controller
new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
D=$(j .workdir) # the workspace directory, absolute: every path below is beneath it

# clirun ARGS...: runs the CLI, sets RC, OUT (stdout) and ERR (stderr).
clirun() {
	cli "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" </dev/null
	RC=$?
	OUT=$(cat "$TMP/cli.out")
	ERR=$(cat "$TMP/cli.err")
}

# clirun_in FILE ARGS...: clirun with stdin from FILE.
clirun_in() {
	local in=$1
	shift
	cli "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" <"$in"
	RC=$?
	OUT=$(cat "$TMP/cli.out")
	ERR=$(cat "$TMP/cli.err")
}

# A failed call: exit 1, nothing on stdout, the API's message on stderr.
assert_refused() {
	assert_eq 1 "$RC" "$1: exit status"
	assert_eq '' "$OUT" "$1: stdout"
	assert_eq "station-sandbox: $2" "$ERR" "$1: the message"
}

# ---------------------------------------------------------------------------------------------
# files

t_put_stat_cat() {
	printf 'hello\n' >"$TMP/hello"
	clirun files put "$WS" "$TMP/hello" "$D/a.txt"
	assert_eq 0 "$RC" "put: exit status" || diag "$ERR"
	assert_eq "$D/a.txt" "$OUT" "put prints the path"
	clirun files stat "$WS" "$D/a.txt"
	assert_eq 0 "$RC" "stat: exit status"
	assert_match "^path: $D/a.txt
type: file
size: 6
mode: 0644
uid: $(id -u)
gid: $(id -g)
modified: 20[0-9-]{8}T[0-9:]{8}\.[0-9]{3}Z
etag: \"[^\"]+\"$" "$OUT" "stat's lines"
	clirun files cat "$WS" "$D/a.txt"
	assert_eq 0 "$RC" "cat: exit status"
	assert_files_eq "$TMP/hello" "$TMP/cli.out" "cat's bytes"
	clirun files stat --json "$WS" "$D/a.txt"
	assert_eq "a.txt file 6 0644 null" "$(jq -r '"\(.name) \(.type) \(.size) \(.mode) \(.linkTarget)"' <<<"$OUT")" "stat --json"
	# relative paths are relative to the workspace directory
	clirun files cat "$WS" a.txt
	assert_eq hello "$OUT" "cat of a relative path"
}

t_ls() {
	cli files mkdir "$WS" "$D/lsdir" >/dev/null
	printf 'abc' | cli files put --mode 0600 "$WS" - "$D/lsdir/f" >/dev/null
	cli files mkdir "$WS" "$D/lsdir/sub" >/dev/null
	run_cmd "$WS" "ln -s /etc/shadow $D/lsdir/link"
	clirun files ls "$WS" "$D/lsdir"
	assert_eq 0 "$RC" "ls: exit status"
	local re='^TYPE +MODE +SIZE +MODIFIED +NAME
file +0600 +3 +20[^ ]+Z +f
symlink +0777 +11 +20[^ ]+Z +link -> /etc/shadow
dir +0755 +[0-9]+ +20[^ ]+Z +sub$'
	assert_match "$re" "$OUT" "ls's table"
	clirun files ls --json "$WS" "$D/lsdir"
	assert_eq "$D/lsdir false f,link,sub /etc/shadow" \
		"$(jq -r '"\(.path) \(.truncated) \([.entries[].name] | join(",")) \(.entries[1].linkTarget)"' <<<"$OUT")" \
		"ls --json"
	# without PATH: the workspace directory
	clirun files ls --json "$WS"
	assert_eq true "$(jq '[.entries[].name] | index("lsdir") != null' <<<"$OUT")" "ls WS lists the workspace directory"
}

t_mkdir_mv_rm() {
	clirun files mkdir "$WS" "$D/m/n"
	assert_refused "mkdir without -p" "\"$D/m/n\": no such file or directory"
	clirun files mkdir -p --mode 0700 "$WS" "$D/m/n"
	assert_eq "0 $D/m/n" "$RC $OUT" "mkdir -p"
	clirun files stat --json "$WS" "$D/m/n"
	assert_eq "dir 0700" "$(jq -r '"\(.type) \(.mode)"' <<<"$OUT")" "mkdir's mode"
	clirun files mkdir "$WS" "$D/m"
	assert_refused "mkdir of an existing directory" "\"$D/m\": exists"
	printf x | cli files put "$WS" - "$D/m/x" >/dev/null
	printf y | cli files put "$WS" - "$D/m/y" >/dev/null
	clirun files mv -n "$WS" "$D/m/x" "$D/m/y"
	assert_refused "mv -n onto an existing file" "\"$D/m/y\": exists"
	clirun files mv "$WS" "$D/m/x" "$D/m/y"
	assert_eq "0 $D/m/y" "$RC $OUT" "mv replaces"
	clirun files cat "$WS" "$D/m/y"
	assert_eq x "$OUT" "the moved content"
	clirun files rm "$WS" "$D/m"
	assert_refused "rm of a non-empty directory" "\"$D/m\": not empty"
	clirun files rm -r "$WS" "$D/m"
	assert_eq "0 " "$RC $OUT" "rm -r"
	clirun files stat "$WS" "$D/m"
	assert_refused "stat after rm" "\"$D/m\": no such file or directory"
}

t_errors() {
	clirun files cat "$WS" "$D/nope"
	assert_refused "cat of a missing file" "\"$D/nope\": no such file or directory"
	clirun files get "$WS" "$D/nope" "$TMP/got-nope"
	assert_refused "get of a missing file" "\"$D/nope\": no such file or directory"
	[[ ! -e $TMP/got-nope ]] || _fail "a failed get left a file"
	assert_eq '' "$(compgen -G "$TMP/got-nope.*")" "a failed get left a temporary file"
	clirun files ls "$WS" "$D/a.txt"
	assert_eq 1 "$RC" "ls of a file: exit status"
	assert_contains "not a directory" "$ERR" "ls of a file: the message"
	clirun files cat "$WS" /etc/passwd
	assert_refused "cat outside a host workspace" "\"/etc/passwd\": escapes the workspace"
	clirun files cat "$WS" "$D/lsdir/link"
	assert_eq 1 "$RC" "cat through a symlink out of the workspace: exit status"
	assert_contains "escapes the workspace" "$ERR" "cat through a symlink: the message"
	clirun files cat --max-bytes 5 "$WS" "$D/a.txt"
	assert_eq 1 "$RC" "cat over --max-bytes: exit status"
	assert_contains "a.txt" "$ERR" "cat over --max-bytes: the message names the file"
	clirun files cat "$WS" nonexistent-ws-file
	assert_eq 1 "$RC" "cat of a missing relative path"
	clirun files ls test-aaaaaaaaaaaaaaaaaaaaaaaaaa
	assert_eq 1 "$RC" "unknown workspace: exit status"
	assert_contains "test-aaaaaaaaaaaaaaaaaaaaaaaaaa" "$ERR" "unknown workspace: the message"
	# usage errors: 64, the usage line
	clirun files cat "$WS"
	assert_eq 64 "$RC" "cat without PATH"
	assert_contains "usage: station-sandbox files cat" "$ERR" "the usage line"
	clirun files put --mode 999 "$WS" "$TMP/hello" x
	assert_eq 64 "$RC" "put with a bad mode"
	assert_contains "--mode wants octal" "$ERR" "bad mode: the message"
	clirun files frob "$WS"
	assert_eq 64 "$RC" "unknown files command"
	clirun files put "$WS" "$TMP/no-such-local" x
	assert_eq 1 "$RC" "put of a missing local file"
	assert_contains "cannot read '$TMP/no-such-local'" "$ERR" "missing local file: the message"
}

t_put_options() {
	printf 'one' | cli files put "$WS" - "$D/opt.txt" >/dev/null
	printf 'two' >"$TMP/two"
	clirun files put --exclusive "$WS" "$TMP/two" "$D/opt.txt"
	assert_refused "put --exclusive onto an existing file" "\"$D/opt.txt\": exists"
	local etag
	etag=$(cli files stat --json "$WS" "$D/opt.txt" | jq -r .etag)
	clirun files put --if-match "$etag" "$WS" "$TMP/two" "$D/opt.txt"
	assert_eq "0 $D/opt.txt" "$RC $OUT" "put --if-match with the current etag"
	clirun files put --if-match "$etag" "$WS" "$TMP/two" "$D/opt.txt"
	assert_eq 1 "$RC" "put --if-match with a stale etag: exit status"
	assert_contains "opt.txt" "$ERR" "stale etag: the message names the file"
	clirun files put --mode 0640 --json "$WS" "$TMP/two" "$D/p/q/r.txt"
	assert_eq 1 "$RC" "put into a missing directory without --parents"
	clirun files put -p --mode 0640 --json "$WS" "$TMP/two" "$D/p/q/r.txt"
	assert_eq "0 r.txt 3 0640" "$RC $(jq -r '"\(.name) \(.size) \(.mode)"' <<<"$OUT")" "put -p --mode --json"
}

# An upload whose stdin never ends stops at ^C and changes nothing.
t_put_interrupted() {
	printf 'before' | cli files put "$WS" - "$D/int.txt" >/dev/null
	local fifo=$TMP/put.fifo pid
	mkfifo "$fifo"
	STATION_SOCKET=$SOCK "$CLI_BIN" files put "$WS" - "$D/int.txt" <"$fifo" >"$TMP/put.out" \
		2>"$TMP/put.err" &
	pid=$!
	exec 8>"$fifo"
	printf 'partial content' >&8
	# (a host workspace: its temporary file shows on the host once the body flows)
	wait_for -t 10 compgen -G "$D/.station-*" >/dev/null || _fail "the upload never began"
	kill -INT "$pid"
	wait_for -t 10 _pid_gone "$pid" || _fail "put did not stop at SIGINT"
	wait "$pid"
	assert_eq 130 "$?" "put ended by SIGINT: exit status" || diag "$(cat "$TMP/put.err")"
	exec 8>&-
	clirun files cat "$WS" "$D/int.txt"
	assert_eq before "$OUT" "the file is unchanged"
}

t_get() {
	(cd "$TMP" && cli files get "$WS" "$D/a.txt") >"$TMP/get.out" 2>&1
	assert_eq 0 "$?" "get without LOCAL: exit status" || diag "$(cat "$TMP/get.out")"
	assert_files_eq "$TMP/hello" "$TMP/a.txt" "get without LOCAL writes the file's name here"
	clirun files get "$WS" "$D/a.txt" -
	assert_eq "0 hello" "$RC $OUT" "get to stdout"
	clirun files get "$WS" "$D/a.txt" "$TMP/local-copy"
	assert_eq "0 " "$RC $OUT" "get to LOCAL prints nothing"
	assert_files_eq "$TMP/hello" "$TMP/local-copy" "get to LOCAL"
	mkdir "$TMP/into"
	clirun files get "$WS" "$D/a.txt" "$TMP/into"
	assert_eq "0 " "$RC $OUT" "get into a directory"
	assert_files_eq "$TMP/hello" "$TMP/into/a.txt" "get into a directory keeps the name"
	assert_eq "a.txt" "$(ls -A "$TMP/into")" "nothing else left in the directory"
}

# The CLI's peak memory (KiB) while it ran ARGS, its output to OUTFILE.
cli_peak_kb() {
	local out=$1
	shift
	STATION_SOCKET=$SOCK /usr/bin/time -f '%M' -o "$TMP/peak" "$CLI_BIN" "$@" >"$out" 2>"$TMP/cli.err"
	RC=$?
	PEAK=$(tail -n 1 "$TMP/peak")
}

t_big_round_trip() {
	# 96 MiB and a few odd bytes, random: a block boundary nowhere in particular
	head -c $((96 * 1024 * 1024 + 4097)) /dev/urandom >"$TMP/big"
	cli_peak_kb "$TMP/put.out" files put "$WS" "$TMP/big" "$D/big.bin"
	assert_eq 0 "$RC" "put: exit status" || diag "$(cat "$TMP/cli.err")"
	assert_le "$PEAK" 32768 "put's peak memory (KiB): streamed, never the whole file"
	cli_peak_kb "$TMP/get.out" files get "$WS" "$D/big.bin" "$TMP/big.back"
	assert_eq 0 "$RC" "get: exit status" || diag "$(cat "$TMP/cli.err")"
	assert_le "$PEAK" 32768 "get's peak memory (KiB)"
	assert_files_eq "$TMP/big" "$TMP/big.back" "get after put"
	# through pipes: the upload goes chunked, the download to stdout
	cat "$TMP/big" | cli files put "$WS" - "$D/big2.bin" >/dev/null
	assert_eq 0 "$?" "put from stdin: exit status"
	cli files cat "$WS" "$D/big2.bin" | cmp -s - "$TMP/big"
	assert_eq 0 "$?" "cat after put from stdin is byte-identical"
	clirun files stat --json "$WS" "$D/big2.bin"
	assert_eq "$(stat -c %s "$TMP/big")" "$(jq -r .size <<<"$OUT")" "the uploaded size"
	rm -f "$TMP/big" "$TMP/big.back"
	cli files rm "$WS" "$D/big.bin"
	cli files rm "$WS" "$D/big2.bin"
}

# watch_lines FILE N: FILE has at least N lines (a wait_for predicate).
watch_lines() {
	[[ -f $1 ]] && (($(wc -l <"$1") >= $2))
}

t_watch() {
	cli files mkdir "$WS" "$D/w" >/dev/null
	cli files watch -r "$WS" "$D/w" >"$TMP/watch.out" 2>"$TMP/watch.err" </dev/null &
	local pid=$!
	wait_for -t 10 watch_lines "$TMP/watch.out" 1 || _fail "no ready line"
	cli files mkdir "$WS" "$D/w/sub" >/dev/null
	cli files mkdir "$WS" "$D/w/sub/inner" >/dev/null
	cli files mv "$WS" "$D/w/sub/inner" "$D/w/sub/moved" >/dev/null
	cli files rm "$WS" "$D/w/sub/moved"
	wait_for -t 10 watch_lines "$TMP/watch.out" 5 || _fail "not every event came"
	# the watched directory goes: the stream ends, and so does the command
	cli files rm -r "$WS" "$D/w"
	wait_for -t 10 _pid_gone "$pid" || _fail "watch did not end with its directory"
	wait "$pid"
	assert_eq 0 "$?" "watch's exit status" || diag "$(cat "$TMP/watch.err")"
	assert_eq "ready
created dir $D/w/sub
created dir $D/w/sub/inner
moved dir $D/w/sub/inner -> $D/w/sub/moved
deleted dir $D/w/sub/moved" "$(head -n 5 "$TMP/watch.out")" "watch's lines"
	# --json: one object a line; ^C ends it with 0
	cli files mkdir "$WS" "$D/wj" >/dev/null
	# (the CLI itself in the background, not a subshell running it: the signal goes to it)
	STATION_SOCKET=$SOCK "$CLI_BIN" files watch --json "$WS" "$D/wj" >"$TMP/watch.out" \
		2>"$TMP/watch.err" </dev/null &
	pid=$!
	wait_for -t 10 watch_lines "$TMP/watch.out" 1 || _fail "no ready event"
	cli files mkdir "$WS" "$D/wj/x" >"$TMP/mkdir.out" 2>&1 || diag "mkdir: $(cat "$TMP/mkdir.out")"
	if ! wait_for -t 10 watch_lines "$TMP/watch.out" 2; then
		_fail "no created event for $D/wj/x in 10 s (it exists: $(ls "$D/wj"))"
		# tell a lost event from a late one: does the next change bring it?
		cli files mkdir "$WS" "$D/wj/y" >/dev/null
		wait_for -t 3 watch_lines "$TMP/watch.out" 2
		diag "after one more change the watch printed: $(tr '\n' ' ' <"$TMP/watch.out")"
	fi
	kill -INT "$pid"
	wait "$pid"
	assert_eq 0 "$?" "watch ended by SIGINT: exit status"
	assert_eq "ready|created dir $D/wj/x" \
		"$(jq -rs 'map(if .type == "ready" then .type else "\(.type) \(.kind) \(.path)" end) | join("|")' "$TMP/watch.out")" \
		"watch --json"
	clirun files watch "$WS" "$D/no-such-dir"
	assert_refused "watch of a missing directory" "\"$D/no-such-dir\": no such file or directory"
}

# A name the sandbox chose reaches the operator's terminal escaped: an escape sequence (here one
# that would set the terminal's title) or a line break cannot act, nor forge a line.
t_hostile_names() {
	cli files mkdir "$WS" "$D/hn" >/dev/null
	run_cmd "$WS" "cd $D/hn && printf x > \"\$(printf 'a\\033]0;pwned\\007b')\" && printf y > \"\$(printf 'two\\nlines')\" && ln -s \"\$(printf '\\033[2J')\" link"
	clirun files ls "$WS" "$D/hn"
	assert_eq 0 "$RC" "ls: exit status"
	assert_eq 0 "$(tr -cd '\033\007' <"$TMP/cli.out" | wc -c)" "no ESC or BEL byte in ls's output"
	assert_eq 4 "$(wc -l <"$TMP/cli.out")" "one line per entry"
	assert_contains 'a\x1b]0;pwned\x07b' "$OUT" "the escape sequence, escaped"
	assert_contains 'two\x0alines' "$OUT" "the line break, escaped"
	assert_contains 'link -> \x1b[2J' "$OUT" "the link target, escaped"
	# positive control: --json carries the exact names (JSON escapes them itself)
	clirun files ls --json "$WS" "$D/hn"
	assert_eq "$(printf 'a\033]0;pwned\007b|link|two\nlines')" "$(jq -r '[.entries[].name] | join("|")' <<<"$OUT")" "--json: the names as they are"
	cli files watch "$WS" "$D/hn" >"$TMP/watch.out" 2>"$TMP/watch.err" </dev/null &
	local pid=$!
	wait_for -t 10 watch_lines "$TMP/watch.out" 1 || _fail "no ready line"
	run_cmd "$WS" "cd $D/hn && rm \"\$(printf 'two\\nlines')\""
	wait_for -t 10 watch_lines "$TMP/watch.out" 2 || _fail "no deleted line"
	cli files rm -r "$WS" "$D/hn"
	wait_for -t 10 _pid_gone "$pid" || _fail "watch did not end"
	wait "$pid"
	assert_eq "deleted file $D/hn/two\x0alines" "$(sed -n 2p "$TMP/watch.out")" "watch's line, escaped"
}

t_library() {
	run_cmd "$WS" "mkdir -p $D/lib && ln -s /etc/shadow $D/lib/link"
	local line
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "${line#ok }" ;;
		"not ok "*) not_ok "${line#not ok }" ;;
		*) echo "$line" ;;
		esac
	done < <("$CHECK" "$SOCK" "$WS" "$D/lib" 2>&1)
}

# ---------------------------------------------------------------------------------------------
# secret

t_secret_set_ls_rm() {
	printf 'ghs_s3cr3tvalue\n' >"$TMP/value"
	clirun_in "$TMP/value" secret set --host github.com "$WS" gh
	assert_eq "0 gh host=github.com username=x-access-token" "$RC $OUT" "secret set"
	printf 'pw' >"$TMP/value2"
	clirun_in "$TMP/value2" secret set --username bob --expires-at 2099-01-01T00:00:00Z "$WS" reg
	assert_eq "0 reg username=bob expiresAt=2099-01-01T00:00:00.000Z" "$RC $OUT" "secret set with a user and an expiry"
	clirun secret ls "$WS"
	assert_eq 0 "$RC" "secret ls: exit status"
	assert_match '^NAME +HOST +USERNAME +EXPIRES +UPDATED
gh +github\.com +x-access-token +- +20[^ ]+Z
reg +- +bob +2099-01-01T00:00:00\.000Z +20[^ ]+Z$' "$OUT" "secret ls's table"
	clirun secret ls --json "$WS"
	assert_eq "gh,reg" "$(jq -r 'map(.name) | join(",")' <<<"$OUT")" "secret ls --json"
	assert_eq '' "$(grep -F s3cr3t "$TMP/cli.out")" "no value in secret ls --json"
	# the final line break is not part of the value: set it again and read the API's view
	clirun_in "$TMP/value" secret set --json --host github.com "$WS" gh
	assert_eq "0 gh" "$RC $(jq -r .name <<<"$OUT")" "secret set --json"
	assert_eq '' "$(grep -F s3cr3t "$TMP/cli.out")" "no value in secret set --json"
	clirun secret rm "$WS" gh
	assert_eq "0 gh deleted" "$RC $OUT" "secret rm"
	clirun secret rm "$WS" gh
	assert_eq 1 "$RC" "secret rm of a deleted secret: exit status"
	assert_contains 'secret "gh" not found' "$ERR" "secret rm of a deleted secret: the message"
	cli secret rm "$WS" reg >/dev/null
}

t_secret_refusals() {
	clirun secret set "$WS" gh ghs_s3cr3t_on_argv
	assert_eq 64 "$RC" "a value on the command line is refused"
	assert_contains "never from the command line" "$ERR" "the message says why"
	clirun secret set "$WS" gh
	assert_eq 64 "$RC" "an empty stdin is refused"
	assert_contains "no value on stdin" "$ERR" "empty stdin: the message"
	head -c 16385 /dev/zero | tr '\0' a >"$TMP/long"
	clirun_in "$TMP/long" secret set "$WS" gh
	assert_eq 64 "$RC" "a value over 16384 bytes is refused"
	printf 'x' >"$TMP/x"
	clirun_in "$TMP/x" secret set --expires-at 2001-01-01T00:00:00Z "$WS" gh
	assert_eq 1 "$RC" "a past expiry: exit status"
	assert_contains "expiresAt" "$ERR" "a past expiry: the message names the field"
	printf 'a\nb' >"$TMP/twolines"
	clirun_in "$TMP/twolines" secret set "$WS" gh
	assert_eq 1 "$RC" "a value with a line break inside: exit status"
	assert_contains "line break" "$ERR" "a line break: the message"
	clirun_in "$TMP/x" secret set "$WS" 'bad/name'
	assert_eq 1 "$RC" "a bad name: exit status"
	assert_contains "invalid secret name 'bad/name'" "$ERR" "a bad name: the message"
	clirun secret ls --json "$WS"
	assert_eq "[]" "$(jq -c . <<<"$OUT")" "nothing was stored"
}

# The value is in the CLI's memory and on its stdin only: not in its argv or environment, nor
# in ps, while it runs.
t_secret_not_in_ps() {
	local fifo=$TMP/value.fifo pid i seen=0
	mkfifo "$fifo"
	STATION_SOCKET=$SOCK "$CLI_BIN" secret set "$WS" psvalue <"$fifo" >"$TMP/set.out" \
		2>"$TMP/set.err" &
	pid=$!
	exec 7>"$fifo"
	printf 'ghs_ps_v4lue_9137' >&7
	# the CLI holds the value and waits for the end of stdin: look at it now, a few times
	for i in 1 2 3; do
		if ps -eo args | grep -v grep | grep -q ghs_ps_v4lue_9137; then
			seen=1
		fi
		if tr '\0' '\n' <"/proc/$pid/cmdline" | grep -q ghs_ps_v4lue_9137 ||
			tr '\0' '\n' <"/proc/$pid/environ" | grep -q ghs_ps_v4lue_9137; then
			seen=1
		fi
	done
	# positive control: the same probe finds a value that is on a command line
	ps -eo args | grep -q "ps_probe_control_[0-9]" || _fail "ps probe control: ps shows no command lines?"
	assert_eq 0 "$seen" "the value in ps, argv or environ"
	exec 7>&-
	wait "$pid"
	assert_eq 0 "$?" "secret set from a fifo: exit status" || diag "$(cat "$TMP/set.err")"
	clirun secret ls --json "$WS"
	assert_eq psvalue "$(jq -r '.[].name' <<<"$OUT")" "stored"
	cli secret rm "$WS" psvalue >/dev/null
}

# From a terminal the value is read without echo: what is typed does not come back.
t_secret_tty_no_echo() {
	python3 - "$CLI_BIN" "$SOCK" "$WS" >"$TMP/tty.out" 2>&1 <<'PY'
import os, pty, sys, time, termios
cli, sock, ws = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.environ["STATION_SOCKET"] = sock
    os.execv(cli, [cli, "secret", "set", ws, "ttyvalue"])
out = b""
deadline = time.monotonic() + 10
while b"(not shown)" not in out and time.monotonic() < deadline:
    out += os.read(fd, 1024)
attrs = termios.tcgetattr(fd)
print("echo:", "on" if attrs[3] & termios.ECHO else "off")
os.write(fd, b"ghs_typed_s3cret\n")
while True:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
print("exit:", os.waitstatus_to_exitcode(status))
print("typed value echoed:", b"ghs_typed_s3cret" in out)
print("output:", out.decode(errors="replace").replace("\r", "").strip())
# ^C at the prompt: the CLI dies of SIGINT and the terminal has its echo back
pid, fd = pty.fork()
if pid == 0:
    os.environ["STATION_SOCKET"] = sock
    os.execv(cli, [cli, "secret", "set", ws, "interrupted"])
out = b""
deadline = time.monotonic() + 10
while b"(not shown)" not in out and time.monotonic() < deadline:
    out += os.read(fd, 1024)
print("echo at the prompt:", "on" if termios.tcgetattr(fd)[3] & termios.ECHO else "off")
os.write(fd, b"\x03")
_, status = os.waitpid(pid, 0)
print("interrupted by:", os.WTERMSIG(status) if os.WIFSIGNALED(status) else "no signal")
print("echo after ^C:", "on" if termios.tcgetattr(fd)[3] & termios.ECHO else "off")
# positive control: the same terminal, the same typing, a program that leaves echo on
pid, fd = pty.fork()
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", "read line"])
os.write(fd, b"ghs_typed_s3cret\n")
out = b""
while True:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
print("control echoed:", b"ghs_typed_s3cret" in out)
PY
	local got
	got=$(cat "$TMP/tty.out")
	assert_contains "echo: off" "$got" "echo is off while the value is typed"
	assert_contains "exit: 0" "$got" "secret set from a terminal: exit status"
	assert_contains "typed value echoed: False" "$got" "the typed value is not echoed"
	assert_contains "control echoed: True" "$got" "positive control: a terminal echoes what is typed"
	assert_contains "echo at the prompt: off" "$got" "^C case: echo off at the prompt"
	assert_contains "interrupted by: 2" "$got" "^C ends secret set with SIGINT"
	assert_contains "echo after ^C: on" "$got" "^C gives the terminal its echo back"
	assert_contains "ttyvalue username=x-access-token" "$got" "the secret's line"
	clirun secret ls --json "$WS"
	assert_eq ttyvalue "$(jq -r '.[].name' <<<"$OUT")" "stored from the terminal"
	cli secret rm "$WS" ttyvalue >/dev/null
}

# a process whose command line the ps probe's control finds
(exec -a ps_probe_control_1 sleep 300) &
PS_CONTROL=$!

run_test "files put, stat, cat (exact output)" t_put_stat_cat
run_test "files ls: the table, --json, symlinks not followed" t_ls
run_test "files mkdir, mv, rm: output and refusals" t_mkdir_mv_rm
run_test "files: errors carry the API's message, usage errors exit 64" t_errors
run_test "files put --exclusive, --if-match, --parents, --mode" t_put_options
run_test "files put from a stdin that never ends stops at ^C, the file unchanged" t_put_interrupted
run_test "files get: to its name, to stdout, to LOCAL" t_get
run_test "files put/get of 96 MiB: byte-identical, the CLI's memory bounded" t_big_round_trip
run_test "files watch: one line per event, ends with the directory; --json; ^C" t_watch
run_test "files ls, watch: names a sandbox chose are escaped for the terminal" t_hostile_names
t_library
run_test "secret set (stdin), ls, rm: exact output, no value shown" t_secret_set_ls_rm
run_test "secret set refuses argv values, empty, oversize and bad values" t_secret_refusals
run_test "secret set: the value is in no argv, environment or ps line" t_secret_not_in_ps
run_test "secret set from a terminal reads without echo" t_secret_tty_no_echo

kill "$PS_CONTROL" 2>/dev/null
wait "$PS_CONTROL" 2>/dev/null || true
