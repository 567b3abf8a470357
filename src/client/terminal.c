/* SPDX-License-Identifier: MIT */
/* Terminals: the requests (through the client's transport like every other call) and
 * attaching, over the library's WebSocket client connection (ws-client.c). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client-internal.h"
#include "ws-client.h"

#define TERM_MAX_MESSAGE (4u * 1024 * 1024)

struct station_term {
	struct client_ws *ws;
	const struct station_term_callbacks *cb;
	void *userdata;
};

/* ---- requests ------------------------------------------------------------------------------ */

static bool term_id_valid(const char *s)
{
	if (!s || !*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return false;
	return true;
}

/* "/v1/workspaces/{ws}/terminals[/{term}][suffix]" */
static int term_path(struct station_client *c, const char *ws, const char *term, const char *suffix,
		     char **ret)
{
	_cleanup_free_ char *tail = NULL;

	if (term && !term_id_valid(term))
		return client_error(c, -EINVAL, "invalid terminal id '%s'", term);
	if (asprintf(&tail, "/terminals%s%s%s", term ? "/" : "", term ? term : "",
		     suffix ? suffix : "") < 0)
		return client_error(c, -ENOMEM, "out of memory");
	return client_path(c, ws, NULL, tail, ret);
}

int station_terminal_open(struct station_client *c, const char *ws,
			  const struct station_terminal_options *opts, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	const struct station_terminal_options none = {};
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	if (!opts)
		opts = &none;
	r = term_path(c, ws, NULL, NULL, &path);
	if (r < 0)
		return r;
	body = json_pack("{s:I,s:I}", "cols", (json_int_t)(opts->cols ? opts->cols : 80), "rows",
			 (json_int_t)(opts->rows ? opts->rows : 24));
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_put_string(c, body, "command", opts->command);
	if (r >= 0)
		r = client_put_string(c, body, "cwd", opts->cwd);
	if (r >= 0)
		r = client_put_env(c, body, opts->env);
	if (r < 0)
		return r;
	return client_create(c, path, body, opts->idempotency_key, ret);
}

int station_terminal_list(struct station_client *c, const char *ws, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *doc = NULL;
	int r = term_path(c, ws, NULL, NULL, &path);

	if (r >= 0)
		r = station_request_json(c, "GET", path, NULL, &doc);
	if (r < 0)
		return r;
	if (!json_is_array(json_object_get(doc, "terminals")))
		return client_error(c, -EPROTO, "the terminal list has no \"terminals\" array");
	if (ret)
		*ret = json_incref(json_object_get(doc, "terminals"));
	return 0;
}

int station_terminal_get(struct station_client *c, const char *ws, const char *term, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	int r = term_path(c, ws, term, NULL, &path);

	return r < 0 ? r : station_request_json(c, "GET", path, NULL, ret);
}

int station_terminal_resize(struct station_client *c, const char *ws, const char *term,
			    unsigned cols, unsigned rows, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *body =
		json_pack("{s:I,s:I}", "cols", (json_int_t)cols, "rows", (json_int_t)rows);
	int r = term_path(c, ws, term, "/resize", &path);

	if (r < 0)
		return r;
	if (!body)
		return client_error(c, -ENOMEM, "out of memory");
	return station_request_json(c, "POST", path, body, ret);
}

int station_terminal_close(struct station_client *c, const char *ws, const char *term, json_t **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	int r = term_path(c, ws, term, NULL, &path);

	return r < 0 ? r : station_request_json(c, "DELETE", path, NULL, ret);
}

/* ---- messages in --------------------------------------------------------------------------- */

static void on_text(struct station_term *t, const char *data, size_t n)
{
	_cleanup_json_ json_t *m = json_loadb(data, n, 0, NULL);
	const char *type = json_string_value(json_object_get(m, "type"));
	json_t *code, *sig;

	if (!type || !t->cb)
		return;
	if (strcmp(type, "gap") == 0 && t->cb->gap)
		t->cb->gap((uint64_t)json_integer_value(json_object_get(m, "bytes")), t->userdata);
	if (strcmp(type, "exit") == 0 && t->cb->exit) {
		code = json_object_get(m, "exitCode");
		sig = json_object_get(m, "signal");
		t->cb->exit(json_is_integer(code) ? (int)json_integer_value(code) : -1,
			    json_is_integer(sig) ? (int)json_integer_value(sig) : -1, t->userdata);
	}
}

static int on_message(void *userdata, enum ws_opcode op, const void *data, size_t n)
{
	struct station_term *t = userdata;

	if (op == WS_OP_BINARY && t->cb && t->cb->output)
		t->cb->output(data, n, t->userdata);
	else if (op == WS_OP_TEXT)
		on_text(t, data, n);
	return 0;
}

/* ---- the API ------------------------------------------------------------------------------- */

int station_term_attach(struct station_client *c, const char *ws, const char *term, bool read_only,
			struct station_term **ret)
{
	CLIENT_ROUTE(c, ws);
	_cleanup_free_ char *path = NULL;
	struct station_term *t;
	int r = term_path(c, ws, term, read_only ? "/attach?readOnly=1" : "/attach", &path);

	if (r < 0)
		return r;
	t = calloc(1, sizeof *t);
	if (!t)
		return client_error(c, -ENOMEM, "out of memory");
	r = client_ws_open(c, path, TERM_MAX_MESSAGE, &t->ws);
	if (r < 0) {
		free(t);
		return r;
	}
	t->ws->on_message = on_message;
	t->ws->userdata = t;
	*ret = t;
	return 0;
}

void station_term_free(struct station_term *t)
{
	if (!t)
		return;
	client_ws_free(t->ws, WS_CLOSE_NORMAL, "detached");
	free(t);
}

int station_term_fd(const struct station_term *t)
{
	return t->ws->fd;
}

int station_term_send(struct station_term *t, const void *data, size_t n)
{
	if (t->ws->close_sent)
		return -EPIPE;
	return n ? client_ws_send(t->ws, WS_OP_BINARY, data, n) : 0;
}

int station_term_resize(struct station_term *t, unsigned cols, unsigned rows)
{
	char text[80];
	int n = snprintf(text, sizeof text, "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}", cols,
			 rows);

	return client_ws_send(t->ws, WS_OP_TEXT, text, (size_t)n);
}

int station_term_pump(struct station_term *t, const struct station_term_callbacks *cb,
		      void *userdata)
{
	uint8_t buf[64 * 1024];

	t->cb = cb;
	t->userdata = userdata;
	return client_ws_pump(t->ws, buf, sizeof buf, 0);
}
