/* SPDX-License-Identifier: MIT */
/* exec, status, cancel, runs: commands in a workspace. exec follows a run's output live and
 * exits the way the command did; SIGINT or SIGTERM cancels the run first. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "domain/state.h"
#include "output.h"

#define STDIN_MAX (1024 * 1024) /* the controller's limit on stdin */
/* How long the start of `exec --json` waits: short commands end within one round trip, and a
 * SIGINT is honoured within that time even before the run's id is known. */
#define EXEC_START_WAIT_MS 1000
/* How long the start of a plain `exec` waits (docs/cli.md): a command that ends within it comes
 * back in the one answer, output included, and needs no second connection; one that runs
 * longer is followed from its first byte, its live output shown at most this late. */
#define EXEC_FAST_WAIT_MS 20
/* After SIGINT or SIGTERM: how long the start still under way, then the cancel, may take
 * before exec gives up on a worker that does not answer and says so (docs/cli.md). */
#define EXEC_CANCEL_MS 5000

#define EXIT_TIMED_OUT 124
#define EXIT_LOST 125
#define EXIT_FAILED_TO_START 127
#define EXIT_SIGNAL_BASE 128
#define EXIT_CANCELLED 130

struct exec_args {
	struct station_exec_options run;
	const char *ws;
	const char *stdin_file;
	char **env;
	char *command;
	char *stdin_data;
	bool json;
};

static volatile sig_atomic_t interrupted;
static struct timespec interrupted_at;

static void on_signal(int sig)
{
	clock_gettime(CLOCK_MONOTONIC, &interrupted_at); /* async-signal-safe */
	interrupted = sig;
}

static int interrupt_check(void *userdata)
{
	return interrupted != 0;
}

/* While the start is under way: a signal lets it finish (the run is then cancelled), for
 * EXEC_CANCEL_MS at most. */
static int start_interrupt_check(void *userdata)
{
	struct timespec now;

	if (!interrupted)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - interrupted_at.tv_sec) * 1000 +
		       (now.tv_nsec - interrupted_at.tv_nsec) / 1000000 >=
	       EXEC_CANCEL_MS;
}

/* The first SIGINT or SIGTERM asks to cancel; a second one kills as usual (SA_RESETHAND). A
 * reader that went away is a failed write (EPIPE), said and exited with EXIT_OUTPUT like any
 * other, not a silent death by SIGPIPE: the message names the run, which goes on. */
static void signals_install(void)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Output that could not be written whole (a full disk, a reader gone): says so, naming the run
 * and the cause, and returns EXIT_OUTPUT. */
static int exec_write_failed(const char *run, int r)
{
	fprintf(stderr, "station-sandbox: cannot write the output of run %s: %s\n", run,
		strerror(-r));
	return EXIT_OUTPUT;
}

static void exec_args_done(struct exec_args *a)
{
	free(a->env);
	free(a->command);
	free(a->stdin_data);
}

/* ---- Exit statuses ----------------------------------------------------------------------- */

static int json_int(const json_t *o, const char *key, int64_t fallback)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int)json_integer_value(v) : (int)fallback;
}

/* The run's signal: a number, or a name such as "SIGKILL" or "KILL"; 0 when unknown. */
static int run_signal(const json_t *run)
{
	json_t *v = json_object_get(run, "signal");
	const char *name = json_string_value(v);

	if (json_is_integer(v))
		return (int)json_integer_value(v);
	if (!name)
		return 0;
	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (int sig = 1; sig < NSIG; sig++) {
		const char *abbrev = sigabbrev_np(sig);

		if (abbrev && strcmp(abbrev, name) == 0)
			return sig;
	}
	return atoi(name);
}

static const char *run_reason(const json_t *run)
{
	const char *reason = json_string_value(json_object_get(run, "reason"));

	return reason ? reason : "no reason given";
}

/* The exit status a terminal run maps to, saying why on stderr unless quiet. */
static int run_exit_status(const json_t *run, bool quiet)
{
	const char *status = json_string_value(json_object_get(run, "status"));
	FILE *f = quiet ? NULL : stderr;

	switch (run_status_from_string(status)) {
	case RUN_EXITED:
		return json_int(run, "exitCode", 0) & 0xff;
	case RUN_KILLED: {
		bool oom = json_is_true(json_object_get(run, "oomKilled"));
		int sig = run_signal(run);

		if (f)
			fprintf(f, "station-sandbox: killed by signal %d%s\n", sig,
				oom ? " (out of memory)" : "");
		return (EXIT_SIGNAL_BASE + sig) & 0xff;
	}
	case RUN_TIMED_OUT:
		if (f)
			fprintf(f, "station-sandbox: timed out after %d ms\n",
				json_int(run, "timeoutMs", 0));
		return EXIT_TIMED_OUT;
	case RUN_CANCELLED:
		if (f)
			fprintf(f, "station-sandbox: cancelled\n");
		return EXIT_CANCELLED;
	case RUN_FAILED_TO_START:
		if (f)
			fprintf(f, "station-sandbox: failed to start: %s\n", run_reason(run));
		return EXIT_FAILED_TO_START;
	case RUN_LOST:
		if (f)
			fprintf(f, "station-sandbox: run lost: %s\n", run_reason(run));
		return EXIT_LOST;
	default: /* running, or a status this CLI does not know */
		break;
	}
	if (f)
		fprintf(f, "station-sandbox: run ended with unknown status '%s'\n",
			status ? status : "unknown");
	return EXIT_FAILED;
}

/* ---- exec -------------------------------------------------------------------------------- */

static int exec_option(struct cli *cli, int opt, struct exec_args *a)
{
	switch (opt) {
	case 't':
		return cli_parse_u64(cli, "--timeout", optarg, &a->run.timeout_ms);
	case 'm':
		return cli_parse_u64(cli, "--max-output", optarg, &a->run.max_output_bytes);
	case 'c':
		a->run.cwd = optarg;
		return 0;
	case 'e':
		return cli_env_add(cli, &a->env, optarg);
	case 's':
		a->stdin_file = optarg;
		return 0;
	case 'j':
		a->json = true;
		return 0;
	default:
		return EXIT_USAGE;
	}
}

/* "exec [OPTIONS] WS -- CMD..." or, without "--", "exec [OPTIONS] WS CMD...". Returns < 0 to go
 * on, else the exit status. */
static int exec_parse(struct cli *cli, int argc, char **argv, struct exec_args *a)
{
	static const struct option options[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "max-output", required_argument, NULL, 'm' },
		{ "cwd", required_argument, NULL, 'c' },
		{ "env", required_argument, NULL, 'e' },
		{ "stdin-file", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int dashdash = 0, n, opt, r;

	for (int i = 1; i < argc && !dashdash; i++)
		if (strcmp(argv[i], "--") == 0)
			dashdash = i;
	n = dashdash ? dashdash : argc;
	opterr = 0;
	while ((opt = getopt_long(n, argv, dashdash ? ":h" : "+:h", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		if (opt == '?' || opt == ':')
			return cli_option_error(cli, argv, opt);
		r = exec_option(cli, opt, a);
		if (r != 0)
			return r;
	}
	if (optind >= n)
		return cli_usage(cli, "no workspace given");
	if (dashdash && optind + 1 < n)
		return cli_usage(cli, "unexpected argument '%s' before '--'", argv[optind + 1]);
	a->ws = argv[optind];
	n = dashdash ? argc - dashdash - 1 : argc - optind - 1;
	if (n == 0)
		return cli_usage(cli, "no command given");
	a->command = cli_words_join(argv + argc - n, n);
	a->run.command = a->command;
	a->run.env = a->env;
	return a->command ? -1 : EXIT_FAILED;
}

/* Reads --stdin-file; says why on stderr when it cannot. */
static int exec_load_stdin(struct exec_args *a)
{
	int r;

	if (!a->stdin_file)
		return 0;
	r = read_file_or_stdin(a->stdin_file, STDIN_MAX, &a->stdin_data, &a->run.stdin_size);
	if (r < 0) {
		fprintf(stderr, "station-sandbox: cannot read stdin from '%s': %s\n", a->stdin_file,
			r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r;
	}
	a->run.stdin_data = a->stdin_data;
	return 0;
}

/* A slow terminal falls behind a fast command again and again: missed bytes are added up and
 * reported at most once a second (and at the end), not once per gap. */
struct follow_state {
	int write_error;
	uint64_t missed[2];
	struct timespec last_report;
};

static void report_missed(struct follow_state *f, bool force)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!force && now.tv_sec - f->last_report.tv_sec < 1)
		return;
	for (int i = 0; i < 2; i++) {
		if (!f->missed[i])
			continue;
		dprintf(STDERR_FILENO, "[station-sandbox: %" PRIu64 " bytes of %s not shown]\n",
			f->missed[i],
			station_stream_to_string(i ? STATION_STREAM_STDERR :
						     STATION_STREAM_STDOUT));
		f->missed[i] = 0;
	}
	f->last_report = now;
}

static int follow_output(enum station_stream s, uint64_t offset, const void *data, size_t len,
			 void *userdata)
{
	struct follow_state *f = userdata;
	int r;

	report_missed(f, false);
	r = output_write(s == STATION_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
	if (r < 0)
		f->write_error = r;
	return r;
}

static int follow_gap(enum station_stream s, uint64_t offset, uint64_t bytes, void *userdata)
{
	struct follow_state *f = userdata;

	f->missed[s == STATION_STREAM_STDERR] += bytes;
	return 0;
}

/* Reads one stream of a finished run's answer: true when it holds every byte the command wrote
 * (no tail part, and the count says so: a server answering otherwise is followed instead). */
static bool run_output_whole(const json_t *run, enum station_stream s, char **ret, size_t *ret_len)
{
	const char *name = station_stream_to_string(s);
	char key[16];
	json_t *total;

	snprintf(key, sizeof(key), "%sTail", name);
	if (json_object_get(run, key))
		return false;
	snprintf(key, sizeof(key), "%sBytes", name);
	total = json_object_get(run, key);
	if (!json_is_integer(total) || station_run_output(run, s, false, ret, ret_len) < 0)
		return false;
	return json_integer_value(total) >= 0 && (uint64_t)json_integer_value(total) == *ret_len;
}

/* The fast path: a run that ended within EXEC_FAST_WAIT_MS came back whole in the answer to its
 * start. Writes its output the way following it would (all of stdout, then all of stderr) and
 * returns 1; 0 when the answer does not hold it all (a run still going, or output beyond what
 * is kept), and the run is then followed. Returns the exit status after saying why when writing
 * fails, as following does. */
static int exec_print_whole(const json_t *run, const char *id)
{
	_cleanup_free_ char *out = NULL, *err = NULL;
	size_t out_len = 0, err_len = 0;
	int r;

	if (!station_run_is_terminal(run) || !json_is_false(json_object_get(run, "truncated")) ||
	    !run_output_whole(run, STATION_STREAM_STDOUT, &out, &out_len) ||
	    !run_output_whole(run, STATION_STREAM_STDERR, &err, &err_len))
		return 0;
	r = output_write(STDOUT_FILENO, out, out_len);
	if (r >= 0)
		r = output_write(STDERR_FILENO, err, err_len);
	if (r < 0)
		return -exec_write_failed(id, r);
	return 1;
}

/* After SIGINT: cancels the run; *ret is the run as it ended (cancelled, or finished first).
 * A worker that does not answer within EXEC_CANCEL_MS is -ETIMEDOUT naming it. */
static int exec_cancel(struct station_client *c, const char *ws, const char *run, json_t **ret)
{
	int r;

	station_client_set_interrupt(c, NULL, NULL);
	station_client_set_timeout(c, EXEC_CANCEL_MS);
	r = station_run_cancel(c, ws, run, ret);
	if (r == -EBUSY)
		r = station_run_get(c, ws, run, 0, ret);
	return r;
}

/* Waits for the run to end, following its output to stdout and stderr (or silently with
 * --json), cancelling it on SIGINT. Returns 0 with *ret the terminal run, else the exit status
 * after saying why. */
static int exec_finish(struct cli *cli, const struct exec_args *a, const char *run, json_t **ret)
{
	static const struct station_follow_callbacks cb = {
		.on_output = follow_output,
		.on_gap = follow_gap,
	};
	struct station_client *c = cli->client;
	struct follow_state f = { 0 };
	int r = -EINTR;

	clock_gettime(CLOCK_MONOTONIC, &f.last_report);
	station_client_set_interrupt(c, interrupt_check, NULL);
	if (!interrupted && a->json)
		r = station_run_wait(c, a->ws, run, -1, ret);
	else if (!interrupted)
		r = station_run_follow(c, a->ws, run, &cb, &f, ret);
	station_client_set_interrupt(c, NULL, NULL);
	report_missed(&f, true);
	if (r == -EINTR && interrupted) {
		r = exec_cancel(c, a->ws, run, ret);
		if (r < 0) {
			fprintf(stderr, "station-sandbox: cannot cancel run %s: %s\n", run,
				station_client_last_error(c));
			return r == -ETIMEDOUT || r == -ECONNREFUSED ? EXIT_NO_CONTROLLER :
								       EXIT_FAILED;
		}
	} else if (r < 0 && f.write_error < 0) {
		/* The run goes on: its timeout bounds it, and `status` shows how it ended. */
		return exec_write_failed(run, f.write_error);
	}
	return r < 0 ? cli_fail(cli, r) : 0;
}

static int cmd_exec(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *run = NULL;
	_cleanup_json_ json_t *end = NULL;
	struct exec_args a = {};
	const char *id;
	int r;

	r = exec_parse(cli, argc, argv, &a);
	if (r < 0 && exec_load_stdin(&a) < 0)
		r = EXIT_FAILED;
	if (r >= 0) {
		exec_args_done(&a);
		return r;
	}
	signals_install();
	a.run.wait_ms = a.json ? EXEC_START_WAIT_MS : EXEC_FAST_WAIT_MS;
	cli->workspace = a.ws;
	station_client_set_interrupt(cli->client, start_interrupt_check, NULL);
	r = station_exec_start(cli->client, a.ws, &a.run, &run);
	station_client_set_interrupt(cli->client, NULL, NULL);
	exec_args_done(&a);
	if (r == -EINTR && interrupted) {
		fprintf(stderr,
			"station-sandbox: interrupted: the start of the command had no answer %d s "
			"after the signal (%s); it may have started: see 'station-sandbox runs %s'\n",
			EXEC_CANCEL_MS / 1000, station_client_last_error(cli->client), a.ws);
		return EXIT_NO_CONTROLLER;
	}
	if (r < 0)
		return cli_fail(cli, r);
	id = json_string_value(json_object_get(run, "id"));
	if (!id) {
		fprintf(stderr, "station-sandbox: the controller answered without a run id\n");
		return EXIT_FAILED;
	}
	/* Without --json a finished run is followed (its output replayed) unless the answer held
	 * all of its output; after a SIGINT it goes the way of cancelling. */
	if (!a.json && !interrupted) {
		r = exec_print_whole(run, id);
		if (r < 0)
			return -r;
		if (r > 0) {
			cli_run_network_report(cli, a.ws, run);
			return run_exit_status(run, false);
		}
	}
	if (!a.json || !station_run_is_terminal(run))
		r = exec_finish(cli, &a, id, &end);
	if (r != 0)
		return r;
	if (a.json) {
		r = output_json(end ? end : run);
		if (r < 0)
			return exec_write_failed(id, r);
	} else {
		cli_run_network_report(cli, a.ws, end ? end : run);
	}
	return run_exit_status(end ? end : run, a.json);
}

/* ---- status, cancel, runs ---------------------------------------------------------------- */

/* "r-… exited exit=0 duration=4ms": the run in one line. */
static void run_print_line(const json_t *run)
{
	const char *status = json_string_value(json_object_get(run, "status"));
	json_t *duration = json_object_get(run, "durationMs");

	printf("%s %s", json_string_value(json_object_get(run, "id")), status ? status : "?");
	switch (run_status_from_string(status)) {
	case RUN_EXITED:
		printf(" exit=%d", json_int(run, "exitCode", -1));
		break;
	case RUN_KILLED:
		printf(" signal=%d%s", run_signal(run),
		       json_is_true(json_object_get(run, "oomKilled")) ? " oom" : "");
		break;
	case RUN_TIMED_OUT:
		printf(" timeout=%dms", json_int(run, "timeoutMs", 0));
		break;
	case RUN_FAILED_TO_START:
	case RUN_LOST:
		printf(" reason=\"%s\"", run_reason(run));
		break;
	default:
		break;
	}
	if (json_is_integer(duration))
		printf(" duration=%" JSON_INTEGER_FORMAT "ms", json_integer_value(duration));
	printf("\n");
	fflush(stdout);
}

/* Writes a finished run's kept output of one stream to fd, marking what was not kept. */
static int run_print_stream(const json_t *run, enum station_stream s, int fd)
{
	_cleanup_free_ char *head = NULL, *tail = NULL;
	const char *name = station_stream_to_string(s);
	char key[16];
	size_t head_len, tail_len;
	json_t *total;
	int r;

	r = station_run_output(run, s, false, &head, &head_len);
	if (r >= 0)
		r = station_run_output(run, s, true, &tail, &tail_len);
	if (r < 0)
		return r;
	r = output_write(fd, head, head_len);
	snprintf(key, sizeof(key), "%sBytes", name);
	total = json_object_get(run, key);
	if (r >= 0 && tail && json_is_integer(total) &&
	    (uint64_t)json_integer_value(total) > head_len + tail_len)
		dprintf(STDERR_FILENO, "[station-sandbox: %" PRIu64 " bytes of %s not shown]\n",
			(uint64_t)json_integer_value(total) - head_len - tail_len, name);
	if (r >= 0 && tail)
		r = output_write(fd, tail, tail_len);
	return r;
}

static int cmd_status(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *run = NULL;
	bool json = false;
	int r;

	r = cli_parse_ws_and(cli, argc, argv, "RUN", &json);
	if (r >= 0)
		return r;
	r = station_run_get(cli->client, argv[optind], argv[optind + 1], 0, &run);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(run) < 0 ? EXIT_FAILED : 0;
	run_print_line(run);
	if (!station_run_is_terminal(run))
		return 0;
	r = run_print_stream(run, STATION_STREAM_STDOUT, STDOUT_FILENO);
	if (r >= 0)
		r = run_print_stream(run, STATION_STREAM_STDERR, STDERR_FILENO);
	if (r < 0)
		fprintf(stderr, "station-sandbox: cannot show the output: %s\n", strerror(-r));
	else
		cli_run_network_report(cli, argv[optind], run);
	return r < 0 ? EXIT_FAILED : 0;
}

static int cmd_cancel(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *run = NULL;
	bool json = false;
	int r;

	r = cli_parse_ws_and(cli, argc, argv, "RUN", &json);
	if (r >= 0)
		return r;
	r = station_run_cancel(cli->client, argv[optind], argv[optind + 1], &run);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(run) < 0 ? EXIT_FAILED : 0;
	run_print_line(run);
	return 0;
}

/* The EXIT column: the exit code, or the signal that killed the run. */
static const char *run_exit_cell(const json_t *run, char *buf, size_t size)
{
	const char *status = json_string_value(json_object_get(run, "status"));

	switch (run_status_from_string(status)) {
	case RUN_EXITED:
		snprintf(buf, size, "%d", json_int(run, "exitCode", -1));
		return buf;
	case RUN_KILLED:
		snprintf(buf, size, "sig%d", run_signal(run));
		return buf;
	default:
		return NULL;
	}
}

static int runs_print(const json_t *list)
{
	static const char *const header[] = { "RUN", "STATUS", "EXIT", "CREATED", "COMMAND" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *run;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, run) {
		const char *command = json_string_value(json_object_get(run, "command"));
		char exit_buf[32], command_buf[48 * 4 + 4];
		const char *row[] = {
			json_string_value(json_object_get(run, "id")),
			json_string_value(json_object_get(run, "status")),
			run_exit_cell(run, exit_buf, sizeof(exit_buf)),
			json_string_value(json_object_get(run, "createdAt")),
			command ? output_shorten(command, 48, command_buf) : NULL,
		};

		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

/* "runs WS [--json] [--limit N]". Returns < 0 to go on, else the exit status. */
static int runs_parse(struct cli *cli, int argc, char **argv, bool *json, uint64_t *limit)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "limit", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		if (opt == 'j')
			*json = true;
		else if (opt == 'l' && cli_parse_u64(cli, "--limit", optarg, limit) != 0)
			return EXIT_USAGE;
		else if (opt != 'l')
			return cli_option_error(cli, argv, opt);
	}
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	if (*limit > 1000)
		return cli_usage(cli, "--limit is at most 1000");
	return -1;
}

/* --json: the document GET …/commands answers, {"commands":[…]}. */
static int runs_print_json(json_t *list)
{
	_cleanup_json_ json_t *doc = json_pack("{s:O}", "commands", list);

	return doc ? output_json(doc) : -ENOMEM;
}

static int cmd_runs(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *list = NULL;
	uint64_t limit = 0;
	bool json = false;
	int r;

	r = runs_parse(cli, argc, argv, &json, &limit);
	if (r >= 0)
		return r;
	r = station_run_list(cli->client, argv[optind], (unsigned)limit, &list);
	if (r < 0)
		return cli_fail(cli, r);
	r = json ? runs_print_json(list) : runs_print(list);
	return r < 0 ? EXIT_FAILED : 0;
}

const struct cli_command cli_cmd_exec = {
	.name = "exec",
	.args = "[--timeout MS] [--json] [--cwd DIR] [--env K=V]... [--max-output BYTES] "
		"[--stdin-file PATH|-] WS -- CMD...",
	.summary = "run a shell command in a workspace, streaming its output; exit as it did",
	.help = "CMD's words are joined with spaces and run by /bin/sh -c.\n\n"
		"  --timeout MS         kill the command after MS milliseconds (default 60000)\n"
		"  --cwd DIR            run in DIR (relative to the workspace directory)\n"
		"  --env K=V            set an environment variable (repeatable)\n"
		"  --max-output BYTES   keep this much output per stream: half head, half tail\n"
		"  --stdin-file PATH|-  feed the command this file (- for our stdin), up to 1 MiB\n"
		"  --json               wait silently and print the finished run as JSON\n"
		"\nExit status: the command's; 128+N when killed by signal N; 124 timed out;\n"
		"125 lost; 127 failed to start; 130 cancelled (SIGINT cancels the run);\n"
		"74 when the output could not be written whole (a full disk, a closed pipe).\n",
	.run = cmd_exec,
};

const struct cli_command cli_cmd_status = {
	.name = "status",
	.args = "[--json] WS RUN",
	.summary = "show a run, with its output once finished",
	.help = "  --json  print the run as JSON\n",
	.run = cmd_status,
};

const struct cli_command cli_cmd_cancel = {
	.name = "cancel",
	.args = "[--json] WS RUN",
	.summary = "cancel a running command and show how it ended",
	.help = "  --json  print the run as JSON\n",
	.run = cmd_cancel,
};

const struct cli_command cli_cmd_runs = {
	.name = "runs",
	.args = "WS [--json] [--limit N]",
	.summary = "list a workspace's runs, newest first",
	.help = "  --json     print the API's answer, {\"commands\":[…]}\n"
		"  --limit N  at most N runs (1-1000, default 100)\n",
	.run = cmd_runs,
};
