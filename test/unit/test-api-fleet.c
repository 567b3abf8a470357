/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/fleet.h"
#include "api/router.h"

Test(fleet, self_listed_is_marked_in_place)
{
	struct fleet *f = calloc(1, sizeof *f);
	struct station_error e = {};

	cr_assert_eq(fleet_parse(f,
				 "w1=http://127.0.0.1:1/,w2=http://127.0.0.1:2,w3=unix:/run/x.sock",
				 NULL, "w2", &e),
		     0, "%s", e.message);
	cr_assert_eq(f->n, 3);
	cr_assert_str_eq(f->v[0].url, "http://127.0.0.1:1", "a final slash is dropped");
	cr_assert(!f->v[0].self);
	cr_assert(f->v[1].self);
	cr_assert_str_eq(fleet_self(f)->name, "w2");
	cr_assert_str_eq(fleet_find(f, "w3")->url, "unix:/run/x.sock");
	cr_assert_null(fleet_find(f, "w4"));
	free(f);
}

Test(fleet, self_not_listed_is_added_first)
{
	struct fleet *f = calloc(1, sizeof *f);
	struct station_error e = {};

	cr_assert_eq(fleet_parse(f, "w2=http://127.0.0.1:2", NULL, "w1", &e), 0, "%s", e.message);
	cr_assert_eq(f->n, 2);
	cr_assert_str_eq(f->v[0].name, "w1");
	cr_assert(f->v[0].self);
	cr_assert_str_eq(f->v[0].url, "", "no URL: answered in process");
	cr_assert_str_eq(f->v[1].name, "w2");
	free(f);
}

Test(fleet, bad_lists_are_refused_by_name)
{
	struct fleet *f = calloc(1, sizeof *f);
	struct station_error e = {};

	cr_assert_eq(fleet_parse(f, "w1=ftp://h:1", NULL, "w1", &e), -EINVAL);
	cr_assert(strstr(e.message, "w1"), "%s", e.message);
	memset(&e, 0, sizeof e);
	cr_assert_eq(fleet_parse(f, "W1=http://h:1", NULL, "w1", &e), -EINVAL);
	cr_assert(e.message[0]);
	memset(&e, 0, sizeof e);
	cr_assert_eq(fleet_parse(f, "w1=http://h:1,w1=http://h:2", NULL, "w1", &e), -EINVAL);
	cr_assert(strstr(e.message, "w1"), "%s", e.message);
	free(f);
}

Test(fleet, file_is_read)
{
	char path[] = "/tmp/fleet-test-XXXXXX";
	int fd = mkstemp(path);
	struct fleet *f = calloc(1, sizeof *f);
	struct station_error e = {};
	static const char text[] = "# workers\nw1 http://10.0.0.1:8080\nw2 https://10.0.0.2:8443\n";

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
	close(fd);
	cr_assert_eq(fleet_parse(f, NULL, path, "w1", &e), 0, "%s", e.message);
	cr_assert_eq(f->n, 2);
	cr_assert(f->v[0].self);
	cr_assert_str_eq(f->v[1].url, "https://10.0.0.2:8443");
	unlink(path);
	cr_assert_lt(fleet_parse(f, NULL, path, "w1", &e), 0, "a missing file");
	free(f);
}

Test(fleet, forward_route)
{
	struct route_match m;
	const char *allow = NULL;

	cr_assert_eq(
		router_match("POST", "/v1/workers/w3/v1/workspaces/w3-ab/commands", &m, &allow), 1);
	cr_assert_eq(m.endpoint, EP_WORKER_FORWARD_POST);
	cr_assert_str_eq(m.ws_id, "w3");
	cr_assert_eq(router_match("GET", "/v1/workers", &m, &allow), 1);
	cr_assert_eq(m.endpoint, EP_WORKERS);
	cr_assert_eq(router_match("GET", "/v1/workers/w3/v1/", &m, &allow), -ENOENT,
		     "nothing after /v1/");
	cr_assert_eq(router_match("GET", "/v1/workers/w3/x", &m, &allow), -ENOENT);
	cr_assert_eq(router_match("PATCH", "/v1/workers/w3/v1/workspaces/web", &m, &allow), 1);
	cr_assert_eq(m.endpoint, EP_WORKER_FORWARD_PATCH);
	cr_assert_eq(router_match("OPTIONS", "/v1/workers/w3/v1/workspaces", &m, &allow), 0);
	cr_assert_str_eq(allow, "GET, HEAD, POST, PUT, PATCH, DELETE");
}
