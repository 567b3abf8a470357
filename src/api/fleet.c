/* SPDX-License-Identifier: MIT */
/* The serving controller's worker list: parsing and the pool its remote calls run on. */
#include "fleet.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "basic/cleanup.h"
#include "event/work.h"

/* Remote calls at once: a hung worker holds one thread for at most its call's bound. */
#define FLEET_THREADS 16
/* A workers file is a few lines; anything past this is not one. */
#define FLEET_FILE_MAX (64u * 1024)

static bool name_valid(const char *s, size_t n)
{
	if (n == 0 || n > FLEET_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* http://HOST[:PORT][/PREFIX], https://…, or unix:/absolute/path; printable, no spaces. */
static bool url_valid(const char *s, size_t n)
{
	size_t skip;

	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)s[i]) || s[i] == '?' || s[i] == '#')
			return false;
	if (n > 5 && strncmp(s, "unix:", 5) == 0)
		return s[5] == '/';
	skip = n > 7 && strncmp(s, "http://", 7) == 0  ? 7 :
	       n > 8 && strncmp(s, "https://", 8) == 0 ? 8 :
							 0;
	return skip > 0 && s[skip] != '/' && !memchr(s + skip, '@', n - skip);
}

int fleet_worker_set(struct fleet_worker *ret, const char *name, size_t name_len, const char *url,
		     size_t url_len, struct station_error *e)
{
	if (!name_valid(name, name_len))
		return station_error_set(e, -EINVAL, "workers",
					 "worker name \"%.*s\": use 1-32 of [a-z0-9-]",
					 (int)MIN(name_len, 64u), name);
	if (url_len > FLEET_URL_MAX || !url_valid(url, url_len))
		return station_error_set(e, -EINVAL, "workers",
					 "worker %.*s: URL \"%.*s\" is not http://HOST:PORT, "
					 "https://HOST:PORT or unix:/PATH",
					 (int)name_len, name, (int)MIN(url_len, 200u), url);
	memset(ret, 0, sizeof *ret);
	memcpy(ret->name, name, name_len);
	memcpy(ret->url, url, url_len);
	/* "http://host:8080/" and "http://host:8080" are the same worker. */
	while (url_len > 0 && ret->url[url_len - 1] == '/' && strncmp(ret->url, "unix:", 5))
		ret->url[--url_len] = '\0';
	return 0;
}

static int fleet_add(struct fleet *w, const char *name, size_t name_len, const char *url,
		     size_t url_len, struct station_error *e)
{
	struct fleet_worker entry;
	int r;

	if (w->n == FLEET_MAX)
		return station_error_set(e, -EINVAL, "workers", "more than %d workers", FLEET_MAX);
	r = fleet_worker_set(&entry, name, name_len, url, url_len, e);
	if (r < 0)
		return r;
	if (fleet_find(w, entry.name))
		return station_error_set(e, -EINVAL, "workers", "worker %s is listed twice",
					 entry.name);
	w->v[w->n++] = entry;
	return 0;
}

static int parse_spec(struct fleet *w, const char *spec, struct station_error *e)
{
	const char *p = spec;

	while (*p) {
		size_t n = strcspn(p, ",");
		const char *eq = memchr(p, '=', n);
		int r;

		if (n == 0) {
			p++;
			continue;
		}
		if (!eq)
			return station_error_set(e, -EINVAL, "workers",
						 "worker \"%.*s\" is not NAME=URL",
						 (int)MIN(n, 200u), p);
		r = fleet_add(w, p, (size_t)(eq - p), eq + 1, n - (size_t)(eq - p) - 1, e);
		if (r < 0)
			return r;
		p += n;
	}
	return 0;
}

static int parse_line(struct fleet *w, char *line, unsigned lineno, const char *path,
		      struct station_error *e)
{
	char *fields[4] = {};
	size_t n = 0;
	char *save = NULL;

	line[strcspn(line, "#")] = '\0';
	for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (n == ELEMENTSOF(fields))
			break;
		fields[n++] = t;
	}
	if (n == 0)
		return 0;
	if (n < 2 || n > 3)
		return station_error_set(e, -EINVAL, "workers",
					 "%s line %u: expected NAME URL [TOKEN-FILE]", path,
					 lineno);
	return fleet_add(w, fields[0], strlen(fields[0]), fields[1], strlen(fields[1]), e);
}

static int parse_file(struct fleet *w, const char *path, struct station_error *e)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[FLEET_URL_MAX + 512];
	unsigned lineno = 0;
	size_t total = 0;

	if (!f)
		return station_error_set(e, -errno, "workers", "cannot open workers file %s: %m",
					 path);
	while (fgets(line, sizeof line, f)) {
		int r;

		lineno++;
		total += strlen(line);
		if (total > FLEET_FILE_MAX)
			return station_error_set(e, -EINVAL, "workers", "%s is over %u bytes", path,
						 FLEET_FILE_MAX);
		if (!strchr(line, '\n') && !feof(f))
			return station_error_set(e, -EINVAL, "workers", "%s line %u is too long",
						 path, lineno);
		line[strcspn(line, "\n")] = '\0';
		r = parse_line(w, line, lineno, path, e);
		if (r < 0)
			return r;
	}
	return 0;
}

int fleet_parse(struct fleet *w, const char *spec, const char *path, const char *self,
		struct station_error *e)
{
	struct fleet_worker *own;
	int r;

	memset(w, 0, sizeof *w);
	r = path ? parse_file(w, path, e) : parse_spec(w, spec ?: "", e);
	if (r < 0)
		return r;
	own = (struct fleet_worker *)fleet_find(w, self);
	if (!own) {
		if (w->n == FLEET_MAX)
			return station_error_set(e, -EINVAL, "workers", "more than %d workers",
						 FLEET_MAX);
		memmove(w->v + 1, w->v, w->n * sizeof w->v[0]);
		own = &w->v[0];
		memset(own, 0, sizeof *own);
		snprintf(own->name, sizeof own->name, "%s", self);
		w->n++;
	}
	own->self = true;
	return 0;
}

const struct fleet_worker *fleet_find(const struct fleet *w, const char *name)
{
	for (size_t i = 0; w && name && i < w->n; i++)
		if (strcmp(w->v[i].name, name) == 0)
			return &w->v[i];
	return NULL;
}

const struct fleet_worker *fleet_self(const struct fleet *w)
{
	for (size_t i = 0; w && i < w->n; i++)
		if (w->v[i].self)
			return &w->v[i];
	return NULL;
}

int fleet_start(struct fleet *w, struct event_loop *loop)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	return event_work_pool_new(loop, FLEET_THREADS, &w->pool);
}

void fleet_stop(struct fleet *w)
{
	if (!w)
		return;
	__atomic_store_n(&w->stopping, 1, __ATOMIC_RELAXED);
	event_work_pool_free(w->pool);
	w->pool = NULL;
}
