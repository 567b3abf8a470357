#!/bin/bash
# The agent's file worker, driven directly (test/helpers/file-client starts a real agent and
# speaks file sessions to it), as a host workspace runs it: --files-root HOME and --user
# 65534. Every operation; the hostile-path table (symlinks out, `..`, absolute paths outside,
# oversize and NUL paths, a FIFO, a device node, a symlink swapped while reads run, a file the
# user may not read), each with its positive control; atomic writes seen by a concurrent
# reader; a write whose client goes away; the session cap; protocol attacks on FILE_OPEN;
# watches (every event kind, recursion, overflow both ways, the end of the directory).
. "$(dirname "$0")/lib.sh"

FC=$BUILD/test/helpers/file-client
chmod 755 "$TMP"
FR=$TMP/fr
HOMEDIR=$FR/home
WS=$HOMEDIR/workspace
OUTSIDE=$FR/outside
MARKER="outside-marker-$RANDOM$RANDOM"
OUT=$TMP/out.jsonl

mkdir -p "$WS" "$OUTSIDE/dir"
chmod 755 "$FR" "$OUTSIDE" "$OUTSIDE/dir"
# readable by the user: only resolution keeps it out
echo "$MARKER" >"$OUTSIDE/marker"
echo "$MARKER" >"$OUTSIDE/dir/f"
chmod 644 "$OUTSIDE/marker" "$OUTSIDE/dir/f"

# as_user CMD...: what the sandbox's user could do itself
as_user() {
	setpriv --reuid 65534 --regid 65534 --clear-groups -- "$@"
}

# fc: runs the script on stdin against a fresh agent; results in $OUT, one JSON line each.
fc() {
	timeout 120 "$FC" --workdir "$WS" --home "$HOMEDIR" --files-root "$HOMEDIR" \
		--user 65534:65534 "$BUILD/src/agent/station-agent" >"$OUT" 2>"$TMP/agent.log"
	local rc=$?
	[[ $rc -eq 0 ]] || _fail "file-client exited $rc: $(tail -n 3 "$OUT")"
}

# l N JQ: JQ applied to the Nth result line.
l() {
	sed -n "${1}p" "$OUT" | jq -r "$2"
}

# expect_err N ERRNO-NAME [WHAT]
expect_err() {
	assert_eq "$2" "$(l "$1" '.error // .timeout // .closed')" "${3:-line $1}: $(sed -n "${1}p" "$OUT" | head -c 300)"
}

# expect_ok N [WHAT]
expect_ok() {
	assert_eq true "$(l "$1" .ok)" "${2:-line $1}: $(sed -n "${1}p" "$OUT" | head -c 300)"
}

reset_home() {
	rm -rf "$WS"
	mkdir -p "$WS"
	echo "good content" >"$WS/a.txt"
	chown -R 65534:65534 "$HOMEDIR"
}

t_stat_list_read() {
	reset_home
	as_user mkdir "$WS/d"
	as_user ln -s a.txt "$WS/link"
	head -c 1048577 /dev/urandom >"$WS/big"
	chown 65534:65534 "$WS/big"
	fc <<-EOF
		stat a.txt
		stat link
		list .
		read a.txt offset=5 length=3 data
		read a.txt suffix=8 data
		read a.txt offset=100
		read a.txt max=5
		read a.txt max=12 offset=1 data
		read big
		read d
		stat missing
		list a.txt
	EOF
	expect_ok 1 && assert_eq "file 13 0644" "$(l 1 '.frames[0] | "\(.type) \(.size) \(.mode)"')" "stat"
	assert_match '^[0-9a-f]+-d-[0-9a-f]+$' "$(l 1 '.frames[0].etag')" "etag"
	assert_eq "symlink a.txt null" "$(l 2 '.frames[0] | "\(.type) \(.link) \(.etag)"')" "stat does not follow"
	assert_eq "dir|a.txt,big,d,link" "$(l 3 '"\(.frames[0].type)|\([.frames[1:][].name] | join(","))"')" "list sorted"
	assert_eq "con" "$(l 4 .data)" "offset+length"
	assert_eq '"content\n"' "$(sed -n 5p "$OUT" | jq -c .data)" "suffix"
	assert_eq "0" "$(l 6 .bytes)" "offset past the end"
	expect_err 7 EFBIG "max_bytes"
	assert_eq "12" "$(l 8 .bytes)" "max_bytes of the range"
	assert_eq "$(sha256sum <"$WS/big" | cut -d' ' -f1)" "$(l 9 .sha256)" "1 MiB read"
	expect_err 10 EISDIR
	expect_err 11 ENOENT
	expect_err 12 ENOTDIR
}

t_write_mkdir_rename_delete() {
	reset_home
	local etag
	fc <<-EOF
		write new.txt text=hello
		read new.txt data
		write a.txt text=replaced mode=0600
		write a.txt exclusive text=x
		write sub/deep/f.txt text=deep
		write sub/deep/f.txt parents text=deep
		stat new.txt
	EOF
	expect_ok 1 && assert_eq "$WS/new.txt" "$(l 1 '.frames[0].path')" "write answers the absolute path"
	assert_eq "true" "$(l 1 .created)" "END says CREATED for a new file"
	assert_eq "false" "$(l 3 .created)" "positive control: not for a replaced one"
	assert_eq "hello" "$(l 2 .data)"
	expect_ok 3 && assert_eq "0600" "$(l 3 '.frames[0].mode')" "mode"
	assert_eq "replaced" "$(cat "$WS/a.txt")"
	assert_eq "65534" "$(stat -c %u "$WS/new.txt")" "written as the user"
	expect_err 4 EEXIST "exclusive"
	expect_err 5 ENOENT "no parents"
	expect_ok 6 "parents"
	etag=$(l 7 '.frames[0].etag')
	fc <<-EOF
		write new.txt text=v2 if_match=$etag
		write new.txt text=v3 if_match=$etag
	EOF
	expect_ok 1 "if_match"
	expect_err 2 ESTALE "stale if_match"
	assert_eq "v2" "$(cat "$WS/new.txt")" "the stale write changed nothing"
	fc <<-EOF
		mkdir dir1
		mkdir dir1
		mkdir dir1 parents
		mkdir x/y/z parents mode=0700
		rename new.txt dir1/moved.txt
		write other.txt text=o
		rename other.txt dir1/moved.txt exclusive
		rename other.txt dir1/moved.txt
		delete sub
		delete sub recursive
		sh ln -s $OUTSIDE/dir $WS/outlink
		delete outlink
		delete dir1/moved.txt if_match=0-0-0
		delete $HOMEDIR
		delete /
	EOF
	expect_ok 1 && expect_err 2 EEXIST && expect_ok 3 "mkdir parents of an existing dir"
	expect_ok 4 && assert_eq "0700" "$(l 4 '.frames[0].mode')"
	expect_ok 5 && assert_eq "$WS/dir1/moved.txt" "$(l 5 '.frames[0].path')"
	expect_ok 6
	expect_err 7 EEXIST "rename exclusive"
	assert_eq "$WS/dir1/moved.txt" "$(l 7 .path)" "the error names PATH2"
	expect_ok 8 && assert_eq "o" "$(cat "$WS/dir1/moved.txt")"
	expect_err 9 ENOTEMPTY && expect_ok 10 && assert_eq "" "$(ls "$WS" | grep -x sub)"
	expect_ok 11 "delete a symlink"
	assert_eq "$MARKER" "$(cat "$OUTSIDE/dir/f")" "the link's target is untouched"
	expect_err 12 ESTALE "delete if_match"
	assert_eq "o" "$(cat "$WS/dir1/moved.txt")" "positive control: it is still there"
	expect_err 13 EBUSY "delete the root"
	expect_err 14 EXDEV "delete / (outside a host root)"
	assert_eq "" "$(find "$HOMEDIR" -name '.station-*')" "no temporary files left"
}

t_hostile_paths() {
	reset_home
	local ok4096 bad4097 i
	ok4096=$(printf './%.0s' {1..2045})/a.txt
	bad4097=$(printf './%.0s' {1..2045})//a.txt
	as_user ln -s "$OUTSIDE/marker" "$WS/abs-out"
	as_user ln -s ../../outside/marker "$WS/rel-out"
	as_user ln -s "$OUTSIDE/dir" "$WS/dir-out"
	as_user ln -s a.txt "$WS/good-link"
	as_user ln -s "$WS/a.txt" "$WS/abs-in" # absolute: refused beneath a host root too
	as_user mkfifo "$WS/fifo"
	mknod "$WS/null" c 1 3
	chmod 666 "$WS/null"
	echo secret >"$WS/root-only"
	chmod 600 "$WS/root-only"
	echo readable >"$WS/root-readable"
	chmod 644 "$WS/root-readable"
	fc <<-EOF
		read abs-out data
		read rel-out data
		read dir-out/f data
		read good-link data
		read ../..
		read ../../outside/marker
		read ../workspace/a.txt data
		read $OUTSIDE/marker
		read $WS/a.txt data
		read $ok4096 data
		read $bad4097
		read a%00b
		read a.txt
		read fifo
		write fifo text=x
		read null
		write null text=x
		stat fifo
		read root-only
		read root-readable data
		stat abs-out
		list dir-out
		write abs-out text=owned
		write dir-out/f text=owned
		rename a.txt dir-out/x
		alive 0
	EOF
	expect_err 1 EXDEV "absolute symlink out"
	expect_err 2 EXDEV "relative symlink out"
	expect_err 3 EXDEV "directory symlink out"
	expect_ok 4 && assert_eq "good content\\u000a" "$(sed -n 4p "$OUT" | jq .data | tr -d '"' | sed 's/\\n/\\u000a/')" "positive control: a link inside"
	expect_err 5 EXDEV "../.."
	expect_err 6 EXDEV "../../outside"
	expect_ok 7 "positive control: .. inside"
	expect_err 8 EXDEV "absolute path outside"
	expect_ok 9 "positive control: absolute path inside"
	expect_ok 10 "positive control: a 4096-byte path"
	expect_err 11 EINVAL "4097-byte path"
	expect_err 12 EINVAL "NUL"
	expect_ok 13 "positive control: the same file"
	expect_err 14 ENXIO "read FIFO"
	expect_err 15 ENXIO "write FIFO"
	expect_err 16 ENXIO "read device"
	expect_err 17 ENXIO "write device"
	assert_eq fifo "$(l 18 '.frames[0].type')" "positive control: stat of the FIFO"
	expect_err 19 EACCES "a file only root may read (the worker dropped to the user)"
	expect_ok 20 "positive control: the same owner, readable"
	expect_ok 21 "stat of an outward link is the link"
	expect_err 22 ENOTDIR "list does not follow a final symlink"
	expect_err 23 EXDEV "write through an outward link"
	expect_err 24 EXDEV "write beneath an outward directory link"
	expect_err 25 EXDEV "rename into an outward directory link"
	assert_eq '{"workers":0}' "$(sed -n 26p "$OUT")" "no worker blocked on the FIFO"
	if grep -q "$MARKER" "$OUT"; then
		_fail "the marker was read"
	fi
	assert_eq "$MARKER" "$(cat "$OUTSIDE/marker")" "outside untouched"
	assert_eq "$MARKER" "$(cat "$OUTSIDE/dir/f")" "outside untouched"
	assert_eq "" "$(ls "$OUTSIDE/dir" | grep -vx f)" "nothing made outside"
}

# A symlink (and a directory on the way) swapped between inside and outside while reads run:
# each answer is the good content or EXDEV, never the marker.
t_swapped_symlink() {
	reset_home
	as_user mkdir "$WS/realdir"
	echo "good content" >"$WS/realdir/f"
	chown 65534:65534 "$WS/realdir/f"
	as_user ln -s a.txt "$WS/sw"
	as_user ln -s realdir "$WS/swdir"
	touch "$TMP/swapping"
	(
		cd "$WS" || exit 1
		while [[ -e $TMP/swapping ]]; do
			as_user ln -sfn "$OUTSIDE/marker" sw.tmp && as_user mv -T sw.tmp sw
			as_user ln -sfn "$OUTSIDE/dir" swd.tmp && as_user mv -T swd.tmp swdir
			as_user ln -sfn a.txt sw.tmp && as_user mv -T sw.tmp sw
			as_user ln -sfn realdir swd.tmp && as_user mv -T swd.tmp swdir
		done
	) &
	local swapper=$!
	fc <<-EOF
		repeat 400 read sw data
		repeat 400 read swdir/f data
	EOF
	rm -f "$TMP/swapping"
	wait "$swapper"
	local good exdev
	good=$(grep -c '"data":"good content' "$OUT")
	exdev=$(grep -c '"error":"EXDEV"' "$OUT")
	if grep -q "$MARKER" "$OUT"; then
		_fail "the marker was read during the swap"
	fi
	assert_eq 800 $((good + exdev)) "every answer good or EXDEV ($good good, $exdev EXDEV)"
	assert_le 1 "$good" "positive control: the good file was read"
	assert_le 1 "$exdev" "the swap was seen"
}

# A reader in a loop while a 32 MiB write replaces 32 MiB: the old or the new, never a mix.
t_write_atomic() {
	reset_home
	head -c 33554432 /dev/zero | tr '\0' 'o' >"$WS/big"
	chown 65534:65534 "$WS/big"
	local old new
	old=$(sha256sum <"$WS/big" | cut -d' ' -f1)
	new=$(head -c 33554432 /dev/zero | tr '\0' 'z' | sha256sum | cut -d' ' -f1)
	touch "$TMP/reading"
	(
		while [[ -e $TMP/reading ]]; do
			sha256sum <"$WS/big" | cut -d' ' -f1
		done >"$TMP/seen"
	) &
	local reader=$!
	wait_for -t 10 test -s "$TMP/seen"
	fc <<-EOF
		write big zero=33554432
	EOF
	sha256sum <"$WS/big" | cut -d' ' -f1 >>"$TMP/seen.after"
	rm -f "$TMP/reading"
	wait "$reader"
	cat "$TMP/seen.after" >>"$TMP/seen"
	expect_ok 1 "the write"
	local other
	other=$(grep -cvx -e "$old" -e "$new" "$TMP/seen")
	assert_eq 0 "$other" "reads that were neither old nor new (of $(wc -l <"$TMP/seen"))"
	assert_le 1 "$(grep -cx "$old" "$TMP/seen")" "positive control: the old content was seen"
	assert_le 1 "$(grep -cx "$new" "$TMP/seen")" "positive control: the new content was seen"
	assert_eq "0644" "$(stat -c %04a "$WS/big")" "the replaced file's mode kept"
}

# A client that goes away mid-body (or never ends) changes nothing and leaves no temp file.
t_write_abandoned() {
	reset_home
	fc <<-EOF
		write a.txt zero=1000000 abort=300000
		alive 0
		write a.txt zero=1000 stall=s1
		close s1
		alive 0
		write a.txt text=after
	EOF
	assert_eq true "$(l 1 .aborted)"
	assert_eq '{"workers":0}' "$(sed -n 2p "$OUT")" "the worker ended with the connection"
	assert_eq true "$(l 3 .stalled)"
	assert_eq '{"workers":0}' "$(sed -n 4p "$OUT")" "the stalled worker ended with the connection"
	assert_eq "" "$(find "$HOMEDIR" -name '.station-*')" "temporary files removed"
	expect_ok 5 "positive control: a complete write"
	assert_eq "after" "$(cat "$WS/a.txt")"
}

t_session_limit_and_protocol() {
	reset_home
	fc <<-EOF
		hold 32 held.txt
		alive 32
		stat a.txt
		release
		alive 0
		stat a.txt
		open-bad-secret a.txt
		open-after-hello a.txt
		stat a.txt
	EOF
	assert_eq '{"held":32}' "$(sed -n 1p "$OUT")"
	assert_eq '{"workers":32}' "$(sed -n 2p "$OUT")"
	expect_err 3 EBUSY "the 33rd session"
	assert_eq '{"workers":0}' "$(sed -n 4p "$OUT")" "held workers end with their connections"
	expect_ok 5 "positive control: a session once there is room"
	assert_eq true "$(l 6 .closed)" "a bad secret is closed without an answer"
	assert_eq true "$(l 7 .closed)" "FILE_OPEN on an authenticated connection is closed"
	expect_ok 8 "positive control: the right secret"
	assert_eq "" "$(find "$HOMEDIR" -name '.station-*')" "the held writes left nothing"
	assert_eq "" "$(ls "$WS" | grep -x held.txt)" "the held writes made nothing"
}

t_list_truncated() {
	reset_home
	mkdir "$WS/many"
	(cd "$WS/many" && seq -f 'f%05g' 1 10001 | xargs touch)
	chown -R 65534:65534 "$WS/many"
	fc <<-EOF
		list many
		list .
	EOF
	assert_eq "true 10001 f00001 f10000" "$(l 1 '"\(.truncated) \(.infos) \(.frames[1].name) \(.frames[-1].name)"')" "truncated at 10000, sorted"
	assert_eq "false" "$(l 2 .truncated)" "positive control: a small directory"
}

t_watch() {
	reset_home
	as_user mkdir -p "$WS/w/pre"
	fc <<-EOF
		watch w1 w recursive
		sh echo x > $WS/w/f1; mv $WS/w/f1 $WS/w/f2; rm $WS/w/f2
		events w1 4
		sh mkdir $WS/w/new
		events w1 1
		sh mkdir $WS/w/new/sub
		events w1 1
		sh echo y > $WS/w/new/sub/g
		events w1 2
		sh mv $WS/w/new $WS/w/renamed && touch $WS/w/renamed/sub/h
		events w1 3
		sh mv $WS/w/renamed $WS/gone && touch $WS/gone/sub/late && touch $WS/w/pre/p
		events w1 3
		events w1 1 ms=300
		watch w2 w
		sh mkdir $WS/w/flat
		events w2 1
		events w1 1
		sh touch $WS/w/flat/inner && touch $WS/w/top
		events w2 2
		events w2 1 ms=300
		close w2
		events w1 4
		sh rm -rf $WS/w
		events w1 20
		alive 0
		watch w3 a.txt
		watch w4 missing
	EOF
	local ev rest
	ev=$(sed -n '1,/"op":"watch"/{/"event"/p}' "$OUT" | jq -c '.event | [.event, .path, (.path2 // ""), .type]' | tr '\n' ' ')
	expect_ok 1 "watch"
	assert_eq '["created","f1","","file"] ["modified","f1","","file"] ["moved","f1","f2","file"] ["deleted","f2","","file"] ["created","new","","dir"] ["created","new/sub","","dir"] ["created","new/sub/g","","file"] ["modified","new/sub/g","","file"] ["moved","new","renamed","dir"] ["created","renamed/sub/h","","file"] ["modified","renamed/sub/h","","file"] ["deleted","renamed","","dir"] ["created","pre/p","","file"] ["modified","pre/p","","file"] ' "$ev" "recursive watch: events in order (a moved-out directory is deleted, nothing of it after)"
	assert_eq '{"timeout":true,"events":0}' "$(sed -n 16p "$OUT")" "nothing more"
	ev=$(sed -n '18,21p' "$OUT" | jq -c '.event | [.event, .path, .type]' | tr '\n' ' ')
	assert_eq '["created","flat","dir"] ["created","flat","dir"] ["created","top","file"] ["modified","top","file"] ' "$ev" "a watch that is not recursive: nothing from inside flat"
	assert_eq '{"timeout":true,"events":0}' "$(sed -n 22p "$OUT")"
	ev=$(sed -n '23,26p' "$OUT" | jq -c '.event | [.event, .path, .type]' | tr '\n' ' ')
	assert_eq '["created","flat/inner","file"] ["modified","flat/inner","file"] ["created","top","file"] ["modified","top","file"] ' "$ev" "the recursive watch sees inside flat"
	ev=$(sed -n '27,$p' "$OUT" | grep '"event"' | jq -c '.event | [.event, .path, .type]' | sort | tr '\n' ' ')
	assert_eq '["deleted","","dir"] ["deleted","flat","dir"] ["deleted","flat/inner","file"] ["deleted","pre","dir"] ["deleted","pre/p","file"] ["deleted","top","file"] ' "$ev" "the removal, and the directory itself"
	assert_eq '{"end":true}' "$(grep -m1 '"end"' "$OUT")" "END after the directory went"
	assert_eq '{"workers":0}' "$(grep workers "$OUT")" "watch workers ended (closed, and the deleted directory)"
	assert_eq ENOTDIR "$(grep '"op":"watch"' "$OUT" | sed -n 3p | jq -r .error)" "watch of a file"
	assert_eq ENOENT "$(grep '"op":"watch"' "$OUT" | sed -n 4p | jq -r .error)" "watch of nothing"
}

# A client that does not read: events beyond the queue are dropped and one OVERFLOW follows.
# A worker that cannot read inotify (stopped): the kernel's queue overflows, one OVERFLOW.
t_watch_overflow() {
	reset_home
	as_user mkdir -p "$WS/o" "$WS/k"
	fc <<-EOF
		watch w1 o
		sh cd $WS/o && seq -f 'f%05g' 1 30000 | xargs touch
		events w1 1000000 ms=2000 quiet
		close w1
		watch w2 k
		events w2 1 ms=200 quiet
		signal 19
		sh cd $WS/k && seq -f 'f%05g' 1 20000 | xargs touch
		signal 18
		events w2 1000000 ms=2000 quiet
		close w2
		alive 0
	EOF
	local first second
	first=$(sed -n 2p "$OUT")
	assert_eq 1 "$(jq .counts.overflow <<<"$first")" "one overflow for a client that did not read: $first"
	assert_le 1000 "$(jq .counts.created <<<"$first")" "events before the overflow: $first"
	assert_le "$(jq .counts.created <<<"$first")" 29999 "some events were dropped: $first"
	assert_eq 0 "$(sed -n 5p "$OUT" | jq .counts.overflow)" "positive control: no overflow while idle"
	second=$(grep counts "$OUT" | sed -n 3p)
	assert_eq 1 "$(jq .counts.overflow <<<"$second")" "the kernel queue's overflow: $second"
	assert_eq '{"workers":0}' "$(grep workers "$OUT")"
}

# Workers do not outlive the agent: a stalled write and a watch end when it is killed.
t_agent_killed() {
	reset_home
	fc <<-EOF
		write a.txt zero=10 stall=s1
		watch w1 .
		alive 2
		kill-agent
	EOF
	assert_eq '{"workers":2}' "$(sed -n 3p "$OUT")"
	assert_eq '{"workers_before":2,"workers_left":0}' "$(sed -n 4p "$OUT")"
	assert_eq "good content" "$(cat "$WS/a.txt")" "the stalled write changed nothing"
}

# More directories than one watch takes: one OVERFLOW, and the watch still works.
t_watch_limit() {
	reset_home
	mkdir "$WS/lots"
	(cd "$WS/lots" && seq -f 'd%05g' 1 8200 | xargs mkdir)
	chown -R 65534:65534 "$WS/lots"
	fc <<-EOF
		watch w1 lots recursive
		events w1 1 ms=5000
		sh touch $WS/lots/d00001/f
		events w1 2
		events w1 1 ms=300
		watch w2 lots/d00001 recursive
		events w2 1 ms=300
	EOF
	expect_ok 1
	assert_eq overflow "$(l 2 .event.event)" "the limit's overflow"
	assert_eq "created d00001/f" "$(l 3 '"\(.event.event) \(.event.path)"')" "positive control: events still come"
	assert_eq '{"timeout":true,"events":0}' "$(sed -n 5p "$OUT")" "one overflow only"
	assert_eq '{"timeout":true,"events":0}' "$(sed -n 7p "$OUT")" "positive control: a small watch has none"
}

run_test files_agent_stat_list_read t_stat_list_read
run_test files_agent_write_mkdir_rename_delete t_write_mkdir_rename_delete
run_test files_agent_hostile_paths t_hostile_paths
run_test files_agent_swapped_symlink t_swapped_symlink
run_test files_agent_write_atomic t_write_atomic
run_test files_agent_write_abandoned t_write_abandoned
run_test files_agent_session_limit_and_protocol t_session_limit_and_protocol
run_test files_agent_list_truncated t_list_truncated
run_test files_agent_watch t_watch
run_test files_agent_watch_overflow t_watch_overflow
run_test files_agent_watch_limit t_watch_limit
run_test files_agent_killed_agent_ends_workers t_agent_killed
