/* SPDX-License-Identifier: MIT */
/* code, context: cells of code in a workspace's stateful interpreter (a code context). code
 * keeps one context per workspace and language, streams the cell's output live, prints its text
 * results, writes its images to files and exits the way the cell ended; SIGINT interrupts the
 * cell, and the context keeps its variables. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "cli.h"
#include "duration.h"
#include "output.h"

#define CODE_MAX (1024 * 1024) /* the controller's limit on a cell */
/* How long interrupting may take before code gives up on a worker that does not answer. */
#define CODE_INTERRUPT_MS 10000
/* How long a context's create or restart may take: the controller's 30 s for the kernel to
 * answer, and some. */
#define CODE_START_MS 60000

#define EXIT_CELL_ERROR 1
#define EXIT_TIMED_OUT 124
#define EXIT_INTERRUPTED 130

struct code_args {
	const char *ws;
	const char *language;
	const char *context;
	const char *out_dir;
	uint64_t timeout_ms;
	bool json;
	char *code;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	interrupted = sig;
}

static int interrupt_check(void *userdata)
{
	return interrupted != 0;
}

/* The first SIGINT interrupts the cell; a second one kills as usual (SA_RESETHAND). */
static void signals_install(void)
{
	struct sigaction sa = { .sa_handler = on_sigint, .sa_flags = SA_RESETHAND };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- Choosing the context ---------------------------------------------------------------- */

/* The workspace's context for the language: the oldest one alive; else a dead one restarted;
 * else a new one. *ret (free()) is its id. */
static int context_choose(struct cli *cli, const struct code_args *a, char **ret)
{
	const struct station_context_options opts = { .language = a->language };
	_cleanup_json_ json_t *list = NULL, *ctx = NULL;
	const char *dead = NULL;
	json_t *c;
	size_t i;
	int r;

	r = station_context_list(cli->client, a->ws, &list);
	if (r < 0)
		return r;
	json_array_foreach(list, i, c) {
		const char *lang = json_str(c, "language"), *state = json_str(c, "state");

		if (!lang || strcmp(lang, a->language) != 0 || !json_str(c, "id"))
			continue;
		if (state && strcmp(state, "dead") == 0) {
			dead = dead ? dead : json_str(c, "id");
			continue;
		}
		*ret = strdup(json_str(c, "id"));
		return *ret ? 0 : -ENOMEM;
	}
	/* The controller answers once the kernel does: up to 30 s. */
	station_client_set_timeout(cli->client, CODE_START_MS);
	if (dead) {
		fprintf(stderr, "station-sandbox: context %s had died; restarting it\n", dead);
		r = station_context_restart(cli->client, a->ws, dead, &ctx);
	} else {
		r = station_context_create(cli->client, a->ws, &opts, &ctx);
	}
	station_client_set_timeout(cli->client, 0);
	if (r < 0)
		return r;
	if (!json_str(ctx, "id"))
		return -EPROTO;
	*ret = strdup(json_str(ctx, "id"));
	return *ret ? 0 : -ENOMEM;
}

/* ---- Printing a cell's outcome ------------------------------------------------------------- */

static int follow_output(enum station_stream s, uint64_t offset, const void *data, size_t len,
			 void *userdata)
{
	return output_write(s == STATION_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
}

static int follow_gap(enum station_stream s, uint64_t offset, uint64_t bytes, void *userdata)
{
	dprintf(STDERR_FILENO, "[station-sandbox: %llu bytes of %s not shown]\n",
		(unsigned long long)bytes, station_stream_to_string(s));
	return 0;
}

/* Writes n bytes to DIR/out-<eid>-<index>.png and says where on stdout. */
static int image_write(const struct code_args *a, const char *eid, size_t index, const char *data,
		       size_t n)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (asprintf(&path, "%s/out-%s-%zu.png", a->out_dir, eid, index) < 0)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || (r = output_write(fd, data, n)) < 0) {
		r = fd < 0 ? -errno : r;
		fprintf(stderr, "station-sandbox: cannot write '%s': %s\n", path, strerror(-r));
		return r;
	}
	printf("[image/png %zu bytes: %s]\n", n, path);
	return 0;
}

/* One result: an image goes to a file, text/plain is printed. */
static int result_print(const struct code_args *a, const char *eid, size_t index,
			const json_t *result)
{
	_cleanup_free_ char *data = NULL;
	size_t n;
	int r;

	r = station_result_data(result, "image/png", &data, &n);
	if (r > 0)
		return image_write(a, eid, index, data, n);
	if (r < 0)
		fprintf(stderr, "station-sandbox: result %zu: its image/png is not valid base64\n",
			index);
	r = station_result_data(result, "text/plain", &data, &n);
	if (r <= 0)
		return r;
	printf("%s%s", data, n > 0 && data[n - 1] == '\n' ? "" : "\n");
	return 0;
}

/* A traceback line without its terminal colours when stderr is not a terminal. */
static void traceback_line(const char *s, bool tty)
{
	for (; !tty && *s; s++) {
		if (*s == '\033' && s[1] == '[') {
			s += 2;
			while (*s && (*s < '@' || *s > '~'))
				s++;
			if (!*s)
				break;
			continue;
		}
		fputc(*s, stderr);
	}
	if (tty)
		fputs(s, stderr);
	fputc('\n', stderr);
}

static void error_print(const json_t *error)
{
	json_t *tb = json_object_get(error, "traceback"), *line;
	bool tty = isatty(STDERR_FILENO);
	size_t i;

	if (json_array_size(tb) > 0)
		json_array_foreach(tb, i, line)
			traceback_line(json_is_string(line) ? json_string_value(line) : "", tty);
	else
		fprintf(stderr, "%s: %s\n",
			json_str(error, "name") ? json_str(error, "name") : "error",
			json_str(error, "value") ? json_str(error, "value") : "");
}

/* The exit status of an ended execution, saying why on stderr. */
static int execution_exit_status(const json_t *e)
{
	const char *status = json_str(e, "status");
	json_t *error = json_object_get(e, "error");

	if (json_is_object(error))
		error_print(error);
	if (!status)
		status = "unknown";
	if (strcmp(status, "ok") == 0)
		return 0;
	if (strcmp(status, "timed_out") == 0) {
		fprintf(stderr,
			"station-sandbox: the cell timed out (the context keeps its state)\n");
		return EXIT_TIMED_OUT;
	}
	if (strcmp(status, "interrupted") == 0) {
		fprintf(stderr, "station-sandbox: the cell was interrupted\n");
		return EXIT_INTERRUPTED;
	}
	if (strcmp(status, "error") != 0)
		fprintf(stderr, "station-sandbox: the cell ended with status '%s'\n", status);
	return EXIT_CELL_ERROR;
}

static int execution_print(const struct code_args *a, const json_t *e)
{
	const char *eid = json_str(e, "id");
	json_t *results = json_object_get(e, "results"), *result;
	size_t i;

	fflush(stderr);
	json_array_foreach(results, i, result)
		if (result_print(a, eid ? eid : "e", i, result) < 0)
			return EXIT_OUTPUT;
	if (fflush(stdout) != 0)
		return EXIT_OUTPUT;
	return execution_exit_status(e);
}

/* ---- code -------------------------------------------------------------------------------- */

/* After SIGINT: interrupts the cell; *ret is the execution as it ended. */
static int code_interrupt(struct cli *cli, const char *ws, const char *cid, const char *eid,
			  json_t **ret)
{
	int r;

	station_client_set_interrupt(cli->client, NULL, NULL);
	station_client_set_timeout(cli->client, CODE_INTERRUPT_MS);
	r = station_context_interrupt(cli->client, ws, cid, ret);
	if (r == -EBUSY) /* it ended first */
		r = station_execution_get(cli->client, ws, cid, eid, 0, ret);
	return r;
}

static int code_option(struct cli *cli, int opt, struct code_args *a)
{
	switch (opt) {
	case 'l':
		if (strcmp(optarg, "python") != 0 && strcmp(optarg, "javascript") != 0)
			return cli_usage(cli, "--lang '%s': want python or javascript", optarg);
		a->language = optarg;
		return 0;
	case 'c':
		a->context = optarg;
		return 0;
	case 'o':
		a->out_dir = optarg;
		return 0;
	case 't':
		if (duration_parse_ms(optarg, &a->timeout_ms) < 0 || a->timeout_ms == 0)
			return cli_usage(cli, "--timeout '%s': want a duration (30s, 5m, 1500)",
					 optarg);
		return 0;
	case 'j':
		a->json = true;
		return 0;
	default:
		return EXIT_USAGE;
	}
}

/* "code [OPTIONS] WS CODE|-". Returns < 0 to go on, else the exit status. */
static int code_parse(struct cli *cli, int argc, char **argv, struct code_args *a)
{
	static const struct option options[] = {
		{ "lang", required_argument, NULL, 'l' },
		{ "context", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "out-dir", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	size_t n;
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		if (opt == '?' || opt == ':')
			return cli_option_error(cli, argv, opt);
		r = code_option(cli, opt, a);
		if (r != 0)
			return r;
	}
	if (argc - optind < 2)
		return cli_usage(cli, argc == optind ? "no workspace given" : "no code given");
	if (argc - optind > 2)
		return cli_usage(cli, "one cell at a time (quote the code, or give - for stdin)");
	a->ws = argv[optind];
	if (strcmp(argv[optind + 1], "-") != 0) {
		a->code = strdup(argv[optind + 1]);
		return a->code ? -1 : EXIT_FAILED;
	}
	r = read_file_or_stdin("-", CODE_MAX, &a->code, &n);
	if (r < 0) {
		fprintf(stderr, "station-sandbox: cannot read the code from stdin: %s\n",
			r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return EXIT_FAILED;
	}
	return -1;
}

/* Runs the cell and follows it to its end; *ret the ended execution. */
static int code_run(struct cli *cli, const struct code_args *a, const char *cid, json_t **ret)
{
	static const struct station_follow_callbacks cb = {
		.on_output = follow_output,
		.on_gap = follow_gap,
	};
	const struct station_execute_options opts = { .code = a->code,
						      .timeout_ms = a->timeout_ms };
	_cleanup_json_ json_t *e = NULL;
	const char *eid;
	int r;

	r = station_context_execute(cli->client, a->ws, cid, &opts, &e);
	if (r == -EBUSY && strcmp(station_client_last_error_code(cli->client), "busy") == 0) {
		fprintf(stderr,
			"station-sandbox: context %s is running another cell (interrupt it with "
			"^C there, or give --context)\n",
			cid);
		return EXIT_FAILED;
	}
	if (r < 0)
		return cli_fail(cli, r);
	eid = json_str(e, "id");
	if (!eid) {
		fprintf(stderr,
			"station-sandbox: the controller answered without an execution id\n");
		return EXIT_FAILED;
	}
	station_client_set_interrupt(cli->client, interrupt_check, NULL);
	if (a->json)
		r = station_execution_get(cli->client, a->ws, cid, eid, STATION_MAX_WAIT_MS, ret);
	while (a->json && r >= 0 && !station_execution_is_done(*ret)) {
		json_decref(*ret);
		r = station_execution_get(cli->client, a->ws, cid, eid, STATION_MAX_WAIT_MS, ret);
	}
	if (!a->json)
		r = station_execution_follow(cli->client, a->ws, cid, eid, &cb, NULL, ret);
	station_client_set_interrupt(cli->client, NULL, NULL);
	if (r == -EINTR && interrupted)
		r = code_interrupt(cli, a->ws, cid, eid, ret);
	return r < 0 ? cli_fail(cli, r) : 0;
}

static int cmd_code(struct cli *cli, int argc, char **argv)
{
	struct code_args a = { .language = "python", .out_dir = "." };
	_cleanup_json_ json_t *e = NULL;
	_cleanup_free_ char *cid = NULL;
	int r;

	r = code_parse(cli, argc, argv, &a);
	if (r >= 0) {
		free(a.code);
		return r;
	}
	cli->workspace = a.ws;
	signals_install();
	r = 0;
	if (a.context)
		cid = strdup(a.context);
	else
		r = context_choose(cli, &a, &cid);
	if (r >= 0 && !cid)
		r = -ENOMEM;
	if (r < 0) {
		free(a.code);
		return cli_fail(cli, r);
	}
	r = code_run(cli, &a, cid, &e);
	free(a.code);
	if (r != 0)
		return r;
	if (a.json)
		return output_json(e) < 0 ? EXIT_OUTPUT : execution_exit_status(e);
	return execution_print(&a, e);
}

const struct cli_command cli_cmd_code = {
	.name = "code",
	.args = "[OPTIONS] WS CODE|-",
	.summary = "run a cell of code in the workspace's stateful interpreter (a code context)",
	.help = "  --lang python|javascript  the language (default: python)\n"
		"  --context CID             this context; default: the workspace's context of the\n"
		"                            language (made at the first cell)\n"
		"  --timeout D               interrupt the cell after D (30s, 5m, 1500 ms)\n"
		"  --out-dir DIR             where image results go, as out-<eid>-<n>.png\n"
		"                            (default: the current directory)\n"
		"  --json                    print the execution as JSON\n"
		"CODE - reads the cell from stdin. The cell's stdout and stderr stream live; text\n"
		"results follow. Exit: 0 ok, 1 error (traceback on stderr), 124 timed out, 130\n"
		"interrupted (^C interrupts the cell; the context keeps its variables).\n",
	.run = cmd_code,
};

/* ---- context ls|rm|restart ----------------------------------------------------------------- */

static int contexts_print(const json_t *list)
{
	static const char *const header[] = { "ID",    "LANGUAGE", "STATE",
					      "CELLS", "CREATED",  "REASON" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *c;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, c) {
		char cells[24];
		json_t *count = json_object_get(c, "executionCount");
		const char *row[] = {
			json_str(c, "id"),	  json_str(c, "language"),
			json_str(c, "state"),	  cells,
			json_str(c, "createdAt"), json_str(c, "reason"),
		};

		snprintf(cells, sizeof(cells), "%lld",
			 json_is_integer(count) ? (long long)json_integer_value(count) : 0LL);
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int cmd_context_ls(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *list = NULL;
	bool json = false;
	int r;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	cli->workspace = argv[optind];
	r = station_context_list(cli->client, argv[optind], &list);
	if (r < 0)
		return cli_fail(cli, r);
	r = json ? output_json(list) : contexts_print(list);
	return r < 0 ? EXIT_FAILED : 0;
}

static int cmd_context_rm(struct cli *cli, int argc, char **argv)
{
	int r;

	r = cli_parse_ws_and(cli, argc, argv, "CID", NULL);
	if (r >= 0)
		return r;
	cli->workspace = argv[optind];
	r = station_context_delete(cli->client, argv[optind], argv[optind + 1]);
	return r < 0 ? cli_fail(cli, r) : 0;
}

static int cmd_context_restart(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *ctx = NULL;
	bool json = false;
	int r;

	r = cli_parse_ws_and(cli, argc, argv, "CID", &json);
	if (r >= 0)
		return r;
	cli->workspace = argv[optind];
	station_client_set_timeout(cli->client, CODE_START_MS);
	r = station_context_restart(cli->client, argv[optind], argv[optind + 1], &ctx);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(ctx) < 0 ? EXIT_FAILED : 0;
	printf("%s %s\n", json_str(ctx, "id"), json_str(ctx, "state"));
	return 0;
}

static const struct cli_command context_ls = {
	.name = "context ls",
	.args = "[--json] WS",
	.summary = "list the workspace's code contexts",
	.help = "  --json  print the contexts as JSON\n",
	.run = cmd_context_ls,
};

static const struct cli_command context_rm = {
	.name = "context rm",
	.args = "WS CID",
	.summary = "end a code context: its interpreter and variables are gone",
	.run = cmd_context_rm,
};

static const struct cli_command context_restart = {
	.name = "context restart",
	.args = "[--json] WS CID",
	.summary = "a fresh interpreter for the context: its variables are gone",
	.help = "  --json  print the context as JSON\n",
	.run = cmd_context_restart,
};

static const struct cli_command *const context_commands[] = {
	&context_ls,
	&context_rm,
	&context_restart,
};

static int cmd_context(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "context", context_commands,
			    ELEMENTSOF(context_commands), NULL, NULL);
}

const struct cli_command cli_cmd_context = {
	.name = "context",
	.args = "ls|rm|restart [ARGS]",
	.summary = "code contexts (the interpreters 'code' runs cells in): ls, rm, restart",
	.help = "  ls WS             list the contexts\n"
		"  rm WS CID         end one\n"
		"  restart WS CID    a fresh interpreter, its variables gone\n",
	.run = cmd_context,
};
