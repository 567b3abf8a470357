/* SPDX-License-Identifier: MIT */
/* service start | ls | show | logs | stop | restart | rm: supervised foreground commands. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

static int interrupt_check(void *userdata)
{
	return interrupted != 0;
}

static int json_int(const json_t *o, const char *key, int64_t fallback)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int)json_integer_value(v) : (int)fallback;
}

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* "web running attempt=3 pid=1234 restarts=2": the service in one line. */
static void service_print_line(const json_t *svc)
{
	const char *reason = json_str(svc, "reason");
	json_t *pid = json_object_get(svc, "mainPid");

	printf("%s %s", json_str(svc, "name") ?: "?", json_str(svc, "state") ?: "?");
	if (json_is_integer(json_object_get(svc, "currentAttempt")))
		printf(" attempt=%d", json_int(svc, "currentAttempt", 0));
	if (json_is_integer(pid))
		printf(" pid=%" JSON_INTEGER_FORMAT, json_integer_value(pid));
	printf(" restarts=%d", json_int(svc, "restartCount", 0));
	if (json_is_true(json_object_get(svc, "stopping")))
		printf(" stopping");
	if (json_str(svc, "nextRestartAt"))
		printf(" next=%s", json_str(svc, "nextRestartAt"));
	if (reason)
		printf(" reason=\"%s\"", reason);
	printf("\n");
}

static const char *attempt_exit_cell(const json_t *a, char *buf, size_t size)
{
	if (json_is_integer(json_object_get(a, "exitCode")))
		snprintf(buf, size, "%d", json_int(a, "exitCode", -1));
	else if (json_is_integer(json_object_get(a, "signal")))
		snprintf(buf, size, "sig%d", json_int(a, "signal", 0));
	else
		return NULL;
	return buf;
}

static int attempts_print(const json_t *svc)
{
	static const char *const header[] = { "ATTEMPT", "END",	   "EXIT",   "STARTED",
					      "ENDED",	 "STDOUT", "STDERR", "REASON" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *a, *attempts = json_object_get(svc, "attempts");
	size_t i;

	if (json_array_size(attempts) == 0)
		return 0;
	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(attempts, i, a) {
		char number[24], exit_buf[32], out[24], err[24], reason_buf[60 * 4 + 4];
		const char *reason = json_str(a, "reason");
		const char *state = json_str(a, "state");
		/* the running attempt (listed last) has no end yet: its byte counts so far */
		bool running = state && strcmp(state, "running") == 0;
		const char *row[] = {
			number,
			running ? "running" : json_str(a, "endReason"),
			attempt_exit_cell(a, exit_buf, sizeof(exit_buf)),
			json_str(a, "startedAt"),
			json_str(a, "endedAt"),
			json_is_integer(json_object_get(a, "stdoutBytes")) ? out : NULL,
			json_is_integer(json_object_get(a, "stderrBytes")) ? err : NULL,
			reason ? output_shorten(reason, 60, reason_buf) : NULL,
		};

		snprintf(out, sizeof(out), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(a, "stdoutBytes")));
		snprintf(err, sizeof(err), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(a, "stderrBytes")));

		snprintf(number, sizeof(number), "%d%s", json_int(a, "number", 0),
			 json_is_true(json_object_get(a, "daemonized")) ? " (daemonized)" : "");
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

/* ---- start ----------------------------------------------------------------------------- */

struct start_args {
	struct station_service_options svc;
	char **env;
	char *command;
	bool json;
};

static int start_option(struct cli *cli, int opt, char **argv, struct start_args *a)
{
	uint64_t v;
	int r;

	switch (opt) {
	case 'r':
		a->svc.restart_policy = optarg;
		return 0;
	case 'm':
	case 'd':
	case 't':
		r = cli_parse_u64(cli,
				  opt == 'm' ? "--max-restarts" :
				  opt == 'd' ? "--delay-ms" :
					       "--stop-timeout-ms",
				  optarg, &v);
		if (r != 0)
			return r;
		if (v > INT64_MAX)
			return cli_usage(cli, "'%s' is too large", optarg);
		*(opt == 'm' ? &a->svc.max_restarts :
		  opt == 'd' ? &a->svc.delay_ms :
			       &a->svc.stop_timeout_ms) = (int64_t)v;
		return 0;
	case 's':
		a->svc.stop_signal = optarg;
		return 0;
	case 'c':
		a->svc.cwd = optarg;
		return 0;
	case 'e':
		return cli_env_add(cli, &a->env, optarg);
	case 'a':
		a->svc.autostart = true;
		return 0;
	case 'j':
		a->json = true;
		return 0;
	case 'h':
		return cli_help(cli);
	default:
		return cli_option_error(cli, argv, opt);
	}
}

/* Returns < 0 to go on, else the exit status. */
static int start_parse(struct cli *cli, int argc, char **argv, struct start_args *a)
{
	static const struct option options[] = {
		{ "restart", required_argument, NULL, 'r' },
		{ "max-restarts", required_argument, NULL, 'm' },
		{ "delay-ms", required_argument, NULL, 'd' },
		{ "stop-signal", required_argument, NULL, 's' },
		{ "stop-timeout-ms", required_argument, NULL, 't' },
		{ "cwd", required_argument, NULL, 'c' },
		{ "env", required_argument, NULL, 'e' },
		{ "autostart", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt, r;

	a->svc.max_restarts = a->svc.delay_ms = a->svc.max_delay_ms = -1;
	a->svc.stop_timeout_ms = -1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		r = start_option(cli, opt, argv, a);
		if (r != 0 || opt == 'h')
			return r;
	}
	if (argc - optind < 2)
		return cli_usage(cli, "WS and NAME are needed");
	if (argc - optind < 3)
		return cli_usage(cli, "no command given (put it after --)");
	a->command = cli_words_join(argv + optind + 2, argc - optind - 2);
	if (!a->command) {
		fprintf(stderr, "station-sandbox: out of memory\n");
		return EXIT_FAILED;
	}
	a->svc.name = argv[optind + 1];
	a->svc.command = a->command;
	a->svc.env = a->env;
	return -1;
}

static int cmd_service_start(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *svc = NULL;
	struct start_args a = {};
	int r;

	r = start_parse(cli, argc, argv, &a);
	if (r < 0) {
		cli->workspace = argv[optind];
		r = station_service_start(cli->client, argv[optind], &a.svc, &svc);
	}
	free(a.env);
	free(a.command);
	if (!svc)
		return r >= 0 ? r : cli_fail(cli, r);
	if (a.json)
		return output_json(svc) < 0 ? EXIT_FAILED : 0;
	service_print_line(svc);
	return 0;
}

/* ---- ls, show, stop, restart, rm ---------------------------------------------------------- */

static int services_print(const json_t *list)
{
	static const char *const header[] = { "NAME", "STATE",	  "RESTARTS",
					      "PID",  "ATTEMPTS", "COMMAND" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *svc;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, svc) {
		const char *command = json_str(svc, "command");
		char restarts[24], pid[24], attempts[24], command_buf[48 * 4 + 4];
		const char *row[] = {
			json_str(svc, "name"),
			json_str(svc, "state"),
			restarts,
			json_is_integer(json_object_get(svc, "mainPid")) ? pid : NULL,
			attempts,
			command ? output_shorten(command, 48, command_buf) : NULL,
		};

		snprintf(restarts, sizeof(restarts), "%d", json_int(svc, "restartCount", 0));
		snprintf(pid, sizeof(pid), "%d", json_int(svc, "mainPid", 0));
		snprintf(attempts, sizeof(attempts), "%zu",
			 json_array_size(json_object_get(svc, "attempts")));
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int cmd_service_ls(struct cli *cli, int argc, char **argv)
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
	r = station_service_list(cli->client, argv[optind], &list);
	if (r < 0)
		return cli_fail(cli, r);
	r = json ? output_json(list) : services_print(list);
	return r < 0 ? EXIT_FAILED : 0;
}

typedef int (*service_fn)(struct station_client *c, const char *ws, const char *name, json_t **ret);

/* show, stop, restart, rm: one call, then the service (or JSON). */
static int service_simple(struct cli *cli, int argc, char **argv, service_fn fn, bool attempts)
{
	_cleanup_json_ json_t *svc = NULL;
	bool json = false;
	int r;

	r = cli_parse_ws_and(cli, argc, argv, "NAME", &json);
	if (r >= 0)
		return r;
	r = fn(cli->client, argv[optind], argv[optind + 1], &svc);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(svc) < 0 ? EXIT_FAILED : 0;
	if (json_object_get(svc, "deleted")) {
		printf("%s deleted\n", argv[optind + 1]);
		return 0;
	}
	service_print_line(svc);
	if (attempts && attempts_print(svc) < 0)
		return EXIT_FAILED;
	return 0;
}

static int cmd_service_show(struct cli *cli, int argc, char **argv)
{
	return service_simple(cli, argc, argv, station_service_get, true);
}

static int cmd_service_stop(struct cli *cli, int argc, char **argv)
{
	return service_simple(cli, argc, argv, station_service_stop, false);
}

static int cmd_service_restart(struct cli *cli, int argc, char **argv)
{
	return service_simple(cli, argc, argv, station_service_restart, false);
}

static int cmd_service_rm(struct cli *cli, int argc, char **argv)
{
	return service_simple(cli, argc, argv, station_service_delete, false);
}

/* ---- logs ------------------------------------------------------------------------------- */

static int logs_output(enum station_stream s, uint64_t offset, const void *data, size_t len,
		       void *userdata)
{
	return output_write(s == STATION_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
}

static int logs_gap(enum station_stream s, uint64_t offset, uint64_t bytes, void *userdata)
{
	dprintf(STDERR_FILENO, "[station-sandbox: %" PRIu64 " bytes of %s not shown]\n", bytes,
		station_stream_to_string(s));
	return 0;
}

static int cmd_service_logs(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	static const struct station_follow_callbacks cb = {
		.on_output = logs_output,
		.on_gap = logs_gap,
	};
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };
	bool follow = false;
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hf", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		if (opt != 'f')
			return cli_option_error(cli, argv, opt);
		follow = true;
	}
	if (argc - optind != 2)
		return cli_usage(cli,
				 argc - optind < 2 ? "WS and NAME are needed" :
						     "unexpected argument '%s'",
				 argv[optind + 2]);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	station_client_set_interrupt(cli->client, interrupt_check, NULL);
	r = station_service_logs(cli->client, argv[optind], argv[optind + 1], follow, &cb, NULL,
				 NULL);
	station_client_set_interrupt(cli->client, NULL, NULL);
	if (r == -EINTR && interrupted)
		return 0; /* a follow ends with ^C; the service goes on */
	return r < 0 ? cli_fail(cli, r) : 0;
}

/* ---- the command table ------------------------------------------------------------------ */

static const struct cli_command service_start = {
	.name = "service start",
	.args = "[--restart no|on-failure|always] [--max-restarts N] [--delay-ms N] "
		"[--stop-signal SIG] [--stop-timeout-ms N] [--cwd DIR] [--env K=V]... "
		"[--autostart] [--json] WS NAME -- CMD...",
	.summary = "start a supervised foreground command",
	.help = "CMD's words are joined with spaces and run by /bin/sh -c; it must not daemonize.\n\n"
		"  --restart POLICY      no (default), on-failure or always\n"
		"  --max-restarts N      restarts before giving up (state exhausted; default 5)\n"
		"  --delay-ms N          wait before each restart (default 1000)\n"
		"  --stop-signal SIG     sent by stop (default SIGTERM), SIGKILL follows\n"
		"  --stop-timeout-ms N   ... after this long (default 10000)\n"
		"  --cwd DIR             run in DIR (relative to the workspace directory)\n"
		"  --env K=V             set an environment variable (repeatable)\n"
		"  --autostart           start again after the workspace restarts\n"
		"  --json                print the service as JSON\n",
	.run = cmd_service_start,
};

static const struct cli_command service_ls = {
	.name = "service ls",
	.args = "[--json] WS",
	.summary = "list a workspace's services",
	.help = "  --json  print the services as a JSON array\n",
	.run = cmd_service_ls,
};

static const struct cli_command service_show = {
	.name = "service show",
	.args = "[--json] WS NAME",
	.summary = "show a service and its attempts",
	.help = "  --json  print the service, attempts and their output, as JSON\n",
	.run = cmd_service_show,
};

static const struct cli_command service_logs = {
	.name = "service logs",
	.args = "[-f] WS NAME",
	.summary = "print a service's output",
	.help = "  -f, --follow  the current attempt's output, live, until it ends (^C stops\n"
		"                following, not the service); without: the last finished attempt\n",
	.run = cmd_service_logs,
};

static const struct cli_command service_stop = {
	.name = "service stop",
	.args = "[--json] WS NAME",
	.summary =
		"stop a service (stop signal, then SIGKILL); no restart follows; waits until stopped",
	.help = "  --json  print the service as JSON\n",
	.run = cmd_service_stop,
};

static const struct cli_command service_restart = {
	.name = "service restart",
	.args = "[--json] WS NAME",
	.summary = "stop the current attempt and start a fresh one",
	.help = "  --json  print the service as JSON\n",
	.run = cmd_service_restart,
};

static const struct cli_command service_rm = {
	.name = "service rm",
	.args = "[--json] WS NAME",
	.summary = "stop a service and forget it",
	.help = "  --json  print the answer as JSON\n",
	.run = cmd_service_rm,
};

static const struct cli_command *const service_commands[] = {
	&service_start, &service_ls,	  &service_show, &service_logs,
	&service_stop,	&service_restart, &service_rm,
};

static int cmd_service(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "service", service_commands,
			    ELEMENTSOF(service_commands), NULL, NULL);
}

const struct cli_command cli_cmd_service = {
	.name = "service",
	.args = "start|ls|show|logs|stop|restart|rm [ARGS]",
	.summary = "supervised services: start, ls, show, logs, stop, restart, rm",
	.help = "  start [OPTIONS] WS NAME -- CMD...  start a supervised foreground command\n"
		"  ls WS                             list services\n"
		"  show WS NAME [--json]             a service and its attempts\n"
		"  logs WS NAME [-f]                 its output (-f: live)\n"
		"  stop WS NAME                      stop it, no restart\n"
		"  restart WS NAME                   a fresh attempt\n"
		"  rm WS NAME                        stop it and forget it\n"
		"'station-sandbox service COMMAND --help' describes a command.\n",
	.run = cmd_service,
};
