/* SPDX-License-Identifier: MIT */
/* The worker list's two forms (workers.h). What is parsed here comes from the user's own
 * environment and files, but a workers file may be shared: every field is bounded and checked,
 * and a token file that others could read is refused rather than used. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"
#include "workers.h"

bool worker_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n >= 1 && n <= WORKER_NAME_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static bool url_chars_valid(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || *s == '?' ||
		    *s == '#')
			return false;
	return true;
}

bool worker_url_valid(const char *s)
{
	const char *host;

	if (!s || strlen(s) > WORKER_URL_MAX || !url_chars_valid(s))
		return false;
	if (strncmp(s, "unix:/", 6) == 0)
		return s[6] != '\0';
	if (strncmp(s, "http://", 7) == 0)
		host = s + 7;
	else if (strncmp(s, "https://", 8) == 0)
		host = s + 8;
	else
		return false;
	/* A host, not a path or credentials. */
	return *host && *host != '/' && *host != ':' && !memchr(host, '@', strcspn(host, "/"));
}

void worker_refs_done(struct worker_refs *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].url);
		free(l->v[i].token_file);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static void worker_refs_donep(struct worker_refs *l)
{
	worker_refs_done(l);
}

const struct worker_ref *worker_refs_find(const struct worker_refs *l, const char *name)
{
	for (size_t i = 0; name && i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return &l->v[i];
	return NULL;
}

/* Checks and appends one worker; where names the entry in messages ("entry 2", "FILE line 3"). */
static int refs_add(struct worker_refs *l, const char *where, const char *name, const char *url,
		    char *token_file, struct station_error *e)
{
	struct worker_ref *v;

	if (!worker_name_valid(name))
		return station_error_set(
			e, -EINVAL, NULL,
			"%s: bad worker name '%.64s' (want 1 to 32 of a-z, 0-9, '-')", where, name);
	if (!worker_url_valid(url))
		return station_error_set(
			e, -EINVAL, NULL,
			"%s: bad URL '%.200s' for worker %s (want http://HOST:PORT, "
			"https://HOST:PORT or unix:/PATH)",
			where, url, name);
	if (worker_refs_find(l, name))
		return station_error_set(e, -EINVAL, NULL, "%s: worker %s is named twice", where,
					 name);
	if (l->n >= WORKERS_MAX)
		return station_error_set(e, -EINVAL, NULL, "%s: more than %d workers", where,
					 WORKERS_MAX);
	v = realloc(l->v, (l->n + 1) * sizeof *v);
	if (!v)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	l->v = v;
	v[l->n] = (struct worker_ref){ .name = strdup(name), .url = strdup(url) };
	if (!v[l->n].name || !v[l->n].url) {
		free(v[l->n].name);
		free(v[l->n].url);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	v[l->n++].token_file = token_file;
	return 0;
}

int workers_parse_env(const char *s, struct worker_refs *ret, struct station_error *e)
{
	_cleanup_(worker_refs_donep) struct worker_refs l = {};
	_cleanup_free_ char *copy = strdup(s ? s : "");
	char *save = NULL, where[48];
	unsigned index = 0;

	if (!copy)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end = tok + strlen(tok), *eq;
		int r;

		index++;
		while (*tok == ' ' || *tok == '\t')
			tok++;
		while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (!*tok)
			continue;
		snprintf(where, sizeof where, "STATION_WORKERS entry %u", index);
		eq = strchr(tok, '=');
		if (!eq)
			return station_error_set(e, -EINVAL, NULL, "%s: '%.64s' is not NAME=URL",
						 where, tok);
		*eq = '\0';
		r = refs_add(&l, where, tok, eq + 1, NULL, e);
		if (r < 0)
			return r;
	}
	*ret = l;
	l = (struct worker_refs){};
	return 0;
}

/* A token file's path as the workers file gives it: "~/" from $HOME, relative from dir. */
static int token_path(const char *field, const char *dir, char **ret)
{
	const char *home = getenv("HOME");

	if (strncmp(field, "~/", 2) == 0)
		return home && *home && asprintf(ret, "%s/%s", home, field + 2) >= 0 ? 0 : -EINVAL;
	if (field[0] == '/')
		return (*ret = strdup(field)) ? 0 : -ENOMEM;
	return asprintf(ret, "%s/%s", dir, field) < 0 ? -ENOMEM : 0;
}

/* One line, comments and the newline already cut: up to three fields. */
static int file_line(struct worker_refs *l, const char *where, const char *dir, char *line,
		     struct station_error *e)
{
	char *save = NULL, *f[4] = {};
	size_t n = 0;
	char *token_file = NULL;
	int r;

	for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (n == 3)
			return station_error_set(e, -EINVAL, NULL,
						 "%s: more than NAME URL [TOKEN-FILE]", where);
		f[n++] = t;
	}
	if (n == 0)
		return 0;
	if (n == 1)
		return station_error_set(e, -EINVAL, NULL, "%s: worker %.64s has no URL", where,
					 f[0]);
	if (f[2]) {
		if (strlen(f[2]) > 4096)
			return station_error_set(e, -EINVAL, NULL, "%s: token file path too long",
						 where);
		r = token_path(f[2], dir, &token_file);
		if (r < 0)
			return station_error_set(
				e, r, NULL, "%s: cannot resolve token file '%.200s'", where, f[2]);
	}
	r = refs_add(l, where, f[0], f[1], token_file, e);
	if (r < 0)
		free(token_file);
	return r;
}

int workers_parse_file_text(const char *text, const char *origin, struct worker_refs *ret,
			    struct station_error *e)
{
	_cleanup_(worker_refs_donep) struct worker_refs l = {};
	_cleanup_free_ char *copy = strdup(text ? text : ""), *dir = strdup(origin ? origin : ".");
	char *slash, *line, *next, where[4200];
	unsigned lineno = 0;

	if (!copy || !dir)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else if (free_and_strdup(&dir, ".") < 0)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	for (line = copy; line; line = next) {
		int r;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		line[strcspn(line, "#")] = '\0';
		snprintf(where, sizeof where, "%.4096s line %u", origin ? origin : "workers",
			 lineno);
		r = file_line(&l, where, dir, line, e);
		if (r < 0)
			return r;
	}
	*ret = l;
	l = (struct worker_refs){};
	return 0;
}

int workers_read_file(const char *path, struct worker_refs *ret, struct station_error *e)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_file(path, WORKERS_FILE_MAX, &text, &len);

	if (r == -E2BIG || r == -EFBIG)
		return station_error_set(e, -EINVAL, NULL, "workers file %s is over %u bytes", path,
					 WORKERS_FILE_MAX);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read workers file %s: %s", path,
					 strerror(-r));
	if (memchr(text, '\0', len))
		return station_error_set(e, -EINVAL, NULL, "workers file %s holds a NUL byte",
					 path);
	return workers_parse_file_text(text, path, ret, e);
}

static bool env_set(const char *name)
{
	const char *v = getenv(name);

	return v && *v;
}

int workers_from_env(struct worker_refs *ret, struct station_error *e)
{
	const char *env = getenv("STATION_WORKERS"), *file = getenv("STATION_WORKERS_FILE");
	const char *home = getenv("HOME");
	_cleanup_free_ char *def = NULL;
	struct worker_refs l = {};
	int r;

	if (env && *env)
		r = workers_parse_env(env, &l, e);
	else if (file && *file)
		r = workers_read_file(file, &l, e);
	else {
		/* A controller named in the environment is chosen over the default file (the SDKs
		 * do the same): one set up for a single worker keeps working beside the file. */
		if (env_set("STATION_URL") || env_set("STATION_SOCKET") || env_set("STATION_ROOT"))
			return 0;
		if (!home || !*home || asprintf(&def, "%s/" WORKERS_DEFAULT_FILE, home) < 0 ||
		    access(def, F_OK) < 0)
			return 0;
		r = workers_read_file(def, &l, e);
	}
	if (r < 0)
		return r;
	if (l.n == 0)
		return station_error_set(e, -EINVAL, NULL, "the worker list (%s) names no worker",
					 env && *env   ? "STATION_WORKERS" :
					 file && *file ? file :
							 def);
	*ret = l;
	return 1;
}

int worker_of_id(const char *id, char ret[WORKER_NAME_MAX + 1])
{
	const char *dash = id ? strrchr(id, '-') : NULL;
	size_t n = dash ? (size_t)(dash - id) : 0;

	if (n == 0 || n > WORKER_NAME_MAX)
		return -EINVAL;
	memcpy(ret, id, n);
	ret[n] = '\0';
	return worker_name_valid(ret) ? 0 : -EINVAL;
}

static bool random_part_valid(const char *s)
{
	if (strlen(s) != WORKSPACE_ID_RANDOM)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '2' && *s <= '7')))
			return false;
	return true;
}

bool workspace_id_shaped(const char *s)
{
	char worker[WORKER_NAME_MAX + 1];
	const char *tail;

	if (!s || worker_of_id(s, worker) < 0)
		return false;
	tail = s + strlen(worker) + 1;
	return random_part_valid(tail);
}

int snapshot_id_worker(const char *id, char ret[WORKER_NAME_MAX + 1])
{
	if (!id || strncmp(id, "s-", 2) != 0)
		return -EINVAL;
	if (random_part_valid(id + 2)) {
		ret[0] = '\0';
		return 0;
	}
	if (!workspace_id_shaped(id + 2))
		return -EINVAL;
	return worker_of_id(id + 2, ret) < 0 ? -EINVAL : 1;
}

static bool token_valid(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

int worker_token_read(const char *path, char **ret, struct station_error *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	char buf[WORKER_TOKEN_MAX + 2];
	struct stat st;
	ssize_t n;
	char *t;

	if (fd < 0)
		return station_error_set(e, -errno, NULL, "cannot open token file %s: %s", path,
					 strerror(errno));
	if (fstat(fd, &st) < 0)
		return station_error_set(e, -errno, NULL, "cannot stat token file %s: %s", path,
					 strerror(errno));
	if (!S_ISREG(st.st_mode))
		return station_error_set(e, -EINVAL, NULL, "token file %s is not a regular file",
					 path);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return station_error_set(e, -EPERM, NULL,
					 "token file %s is owned by uid %u, not by you or root",
					 path, (unsigned)st.st_uid);
	if (st.st_mode & 077)
		return station_error_set(
			e, -EPERM, NULL,
			"token file %s has mode %04o: others may read it (chmod 600 %s)", path,
			(unsigned)(st.st_mode & 07777), path);
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return station_error_set(e, -errno, NULL, "cannot read token file %s: %s", path,
					 strerror(errno));
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (n > WORKER_TOKEN_MAX || !token_valid(buf)) {
		explicit_bzero(buf, sizeof buf);
		return station_error_set(e, -EINVAL, NULL,
					 "token file %s does not hold one token (printable, no "
					 "spaces, at most %d bytes)",
					 path, WORKER_TOKEN_MAX);
	}
	t = strdup(buf);
	explicit_bzero(buf, sizeof buf);
	if (!t)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*ret = t;
	return 0;
}
