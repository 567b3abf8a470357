/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/util.h"
#include "basic/workers.h"

static void refs_freep(struct worker_refs *l)
{
	worker_refs_done(l);
}
#define _cleanup_refs_ _cleanup_(refs_freep)

Test(workers, env_parses_names_urls_and_order)
{
	_cleanup_refs_ struct worker_refs l = {};
	struct station_error e = {};

	cr_assert_eq(workers_parse_env(" w1=http://127.0.0.1:8080 , w2=https://h2.example:443/x,,"
				       "w-3=unix:/run/s.sock",
				       &l, &e),
		     0, "%s", e.message);
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(l.v[0].name, "w1");
	cr_assert_str_eq(l.v[0].url, "http://127.0.0.1:8080");
	cr_assert_str_eq(l.v[1].name, "w2");
	cr_assert_str_eq(l.v[1].url, "https://h2.example:443/x");
	cr_assert_str_eq(l.v[2].name, "w-3");
	cr_assert_str_eq(l.v[2].url, "unix:/run/s.sock");
	cr_assert_null(l.v[0].token_file);
	cr_assert_eq(worker_refs_find(&l, "w2"), &l.v[1]);
	cr_assert_null(worker_refs_find(&l, "w9"));
}

static void env_refused(const char *s, const char *needle)
{
	struct worker_refs l = { .n = 99 };
	struct station_error e = {};

	cr_assert_eq(workers_parse_env(s, &l, &e), -EINVAL, "accepted '%s'", s);
	cr_assert_not_null(strstr(e.message, needle), "'%s': message '%s' lacks '%s'", s, e.message,
			   needle);
	cr_assert_eq(l.n, 99, "ret touched on failure");
}

Test(workers, env_refuses_bad_entries)
{
	env_refused("W1=http://a:1", "bad worker name 'W1'");
	env_refused("w_1=http://a:1", "bad worker name 'w_1'");
	env_refused("=http://a:1", "bad worker name ''");
	env_refused("w123456789012345678901234567890123=http://a:1", "bad worker name");
	env_refused("w1=ftp://a:1", "bad URL 'ftp://a:1' for worker w1");
	env_refused("w1=http://", "bad URL");
	env_refused("w1=http://a b:1", "bad URL");
	env_refused("w1=http://user:pw@host:1", "bad URL");
	env_refused("w1=http://a:1/?x=1", "bad URL");
	env_refused("w1=unix:relative.sock", "bad URL");
	env_refused("w1=http://a:1,w1=http://b:2", "entry 2: worker w1 is named twice");
	env_refused("w1", "'w1' is not NAME=URL");
}

Test(workers, env_empty_is_an_empty_list)
{
	_cleanup_refs_ struct worker_refs l = {};

	cr_assert_eq(workers_parse_env(" , ,", &l, NULL), 0);
	cr_assert_eq(l.n, 0);
}

Test(workers, env_too_many)
{
	_cleanup_free_ char *s = calloc(WORKERS_MAX + 1, 32);
	struct worker_refs l = {};
	struct station_error e = {};
	size_t off = 0;

	for (int i = 0; i <= WORKERS_MAX; i++)
		off += (size_t)snprintf(s + off, 32, "w%d=http://h:%d,", i, i + 1);
	cr_assert_eq(workers_parse_env(s, &l, &e), -EINVAL);
	cr_assert_not_null(strstr(e.message, "more than 256 workers"), "%s", e.message);
}

Test(workers, file_comments_token_files_and_blank_lines)
{
	_cleanup_refs_ struct worker_refs l = {};
	struct station_error e = {};
	const char *text = "# the fleet\n"
			   "\n"
			   "w1 http://10.0.0.1:8080   # first\n"
			   "  w2\thttps://w2.example:8443 tokens/w2.token\n"
			   "w3 unix:/srv/w3/station.sock /etc/w3.token\n";

	setenv("HOME", "/home/someone", 1);
	cr_assert_eq(workers_parse_file_text(text, "/etc/station/workers", &l, &e), 0, "%s",
		     e.message);
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(l.v[0].name, "w1");
	cr_assert_str_eq(l.v[0].url, "http://10.0.0.1:8080");
	cr_assert_null(l.v[0].token_file);
	cr_assert_str_eq(l.v[1].token_file, "/etc/station/tokens/w2.token");
	cr_assert_str_eq(l.v[2].token_file, "/etc/w3.token");
	worker_refs_done(&l);
	cr_assert_eq(workers_parse_file_text("w4 http://h:1 ~/t\n", "workers", &l, &e), 0);
	cr_assert_str_eq(l.v[0].token_file, "/home/someone/t");
}

static void file_refused(const char *text, const char *needle)
{
	struct worker_refs l = {};
	struct station_error e = {};

	cr_assert_lt(workers_parse_file_text(text, "/x/workers", &l, &e), 0, "accepted '%s'", text);
	cr_assert_not_null(strstr(e.message, needle), "'%s': message '%s' lacks '%s'", text,
			   e.message, needle);
}

Test(workers, file_refuses_bad_lines)
{
	file_refused("w1 http://a:1\nw1 http://b:2\n",
		     "/x/workers line 2: worker w1 is named twice");
	file_refused("# c\nBad http://a:1\n", "line 2: bad worker name 'Bad'");
	file_refused("w1\n", "line 1: worker w1 has no URL");
	file_refused("w1 gopher://a\n", "line 1: bad URL 'gopher://a'");
	file_refused("w1 http://a:1 t extra\n", "line 1: more than NAME URL [TOKEN-FILE]");
}

Test(workers, id_names_its_worker)
{
	char w[WORKER_NAME_MAX + 1];

	cr_assert_eq(worker_of_id("w2-3vqkabcdefghijklmnopqrstuv", w), 0);
	cr_assert_str_eq(w, "w2");
	cr_assert_eq(worker_of_id("eu-west-1-3vqkabcdefghijklmnopqrstuv", w), 0);
	cr_assert_str_eq(w, "eu-west-1");
	cr_assert_eq(worker_of_id("nodash", w), -EINVAL);
	cr_assert_eq(worker_of_id("-abc", w), -EINVAL);
	cr_assert_eq(worker_of_id("W2-abc", w), -EINVAL);
	cr_assert_eq(worker_of_id("w123456789012345678901234567890123-abc", w), -EINVAL);
}

static char *token_file(const char *content, mode_t mode)
{
	char *path = strdup("/tmp/test-workers-token-XXXXXX");
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

Test(workers, token_file_mode_is_checked)
{
	_cleanup_free_ char *good = token_file("s3cret-token\n", 0600);
	_cleanup_free_ char *open_to_group = token_file("s3cret-token\n", 0640);
	_cleanup_free_ char *open_to_all = token_file("s3cret-token\n", 0644);
	_cleanup_free_ char *empty = token_file("\n", 0600);
	_cleanup_free_ char *spaced = token_file("two words\n", 0600);
	struct station_error e = {};
	char *t = NULL;

	/* Positive control: the same content at 0600 is read. */
	cr_assert_eq(worker_token_read(good, &t, &e), 0, "%s", e.message);
	cr_assert_str_eq(t, "s3cret-token");
	erase_and_free(t);
	t = NULL;
	cr_assert_eq(worker_token_read(open_to_group, &t, &e), -EPERM);
	cr_assert_not_null(strstr(e.message, "has mode 0640"), "%s", e.message);
	cr_assert_null(t);
	cr_assert_eq(worker_token_read(open_to_all, &t, &e), -EPERM);
	cr_assert_not_null(strstr(e.message, "has mode 0644"), "%s", e.message);
	cr_assert_eq(worker_token_read(empty, &t, &e), -EINVAL);
	cr_assert_eq(worker_token_read(spaced, &t, &e), -EINVAL);
	cr_assert_eq(worker_token_read("/tmp/no-such-token-file-here", &t, &e), -ENOENT);
	cr_assert_eq(worker_token_read("/tmp", &t, &e), -EINVAL);
	cr_assert_null(t);
	unlink(good);
	unlink(open_to_group);
	unlink(open_to_all);
	unlink(empty);
	unlink(spaced);
}

Test(workers, env_wins_over_files)
{
	_cleanup_refs_ struct worker_refs l = {};
	struct station_error e = {};

	setenv("STATION_WORKERS", "a=http://a:1", 1);
	setenv("STATION_WORKERS_FILE", "/nonexistent/workers", 1);
	cr_assert_eq(workers_from_env(&l, &e), 1, "%s", e.message);
	cr_assert_str_eq(l.v[0].name, "a");
	unsetenv("STATION_WORKERS");
	worker_refs_done(&l);
	cr_assert_eq(workers_from_env(&l, &e), -ENOENT);
	cr_assert_not_null(strstr(e.message, "/nonexistent/workers"), "%s", e.message);
	unsetenv("STATION_WORKERS_FILE");
	setenv("HOME", "/nonexistent-home", 1);
	cr_assert_eq(workers_from_env(&l, &e), 0);
}

Test(workers, id_shape)
{
	cr_assert(workspace_id_shaped("w2-3vqkabcdefghijklmnopqrstuv"));
	cr_assert(workspace_id_shaped("eu-west-1-abcdefghijklmnopqrstuvwxyz"));
	cr_assert_not(workspace_id_shaped("w2-3vqkabcdefghijklmnopqrst"));    /* 25 */
	cr_assert_not(workspace_id_shaped("w2-3vqkabcdefghijklmnopqrstuvw")); /* 27 */
	cr_assert_not(workspace_id_shaped("w2-3vqkabcdefghijklmnopqrst1v"));  /* 1 is not base32 */
	cr_assert_not(workspace_id_shaped("W2-3vqkabcdefghijklmnopqrstuv"));
	cr_assert_not(workspace_id_shaped("my-app"));
	cr_assert_not(workspace_id_shaped(""));
	cr_assert_not(workspace_id_shaped(NULL));
}

Test(workers, snapshot_id_worker)
{
	char name[WORKER_NAME_MAX + 1] = "x";

	cr_assert_eq(snapshot_id_worker("s-w2-3vqkabcdefghijklmnopqrstuv", name), 1);
	cr_assert_str_eq(name, "w2");
	cr_assert_eq(snapshot_id_worker("s-eu-west-1-abcdefghijklmnopqrstuvwxyz", name), 1);
	cr_assert_str_eq(name, "eu-west-1");
	/* taken before ids carried their worker: kept by whichever worker has it */
	cr_assert_eq(snapshot_id_worker("s-3vqkabcdefghijklmnopqrstuv", name), 0);
	cr_assert_str_eq(name, "");
	cr_assert_eq(snapshot_id_worker("s-3vqkabcdefghijklmnopqrst", name), -EINVAL); /* 24 */
	cr_assert_eq(snapshot_id_worker("s-w2-3vqkabcdefghijklmnopqrst", name), -EINVAL);
	cr_assert_eq(snapshot_id_worker("s-W2-3vqkabcdefghijklmnopqrstuv", name), -EINVAL);
	cr_assert_eq(snapshot_id_worker("w2-3vqkabcdefghijklmnopqrstuv", name), -EINVAL);
	cr_assert_eq(snapshot_id_worker("s--3vqkabcdefghijklmnopqrstuv", name), -EINVAL);
	cr_assert_eq(snapshot_id_worker("s-", name), -EINVAL);
	cr_assert_eq(snapshot_id_worker("", name), -EINVAL);
	cr_assert_eq(snapshot_id_worker(NULL, name), -EINVAL);
}
