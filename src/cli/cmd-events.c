/* SPDX-License-Identifier: MIT */
/* station-sandbox events: GET /v1/events, one JSON line per event, until ^C (or --count). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "output.h"

struct events_args {
	uint64_t count; /* 0: for ever */
	uint64_t seen;
	int write_error; /* -errno of a failed write to stdout */
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = 1;
}

static int interrupt_check(void *userdata)
{
	return interrupted;
}

static int on_event(json_t *event, void *userdata)
{
	struct events_args *a = userdata;

	a->write_error = output_json_line(event);
	if (a->write_error < 0)
		return a->write_error;
	if (a->count && ++a->seen >= a->count)
		return -ECANCELED;
	return 0;
}

static int cmd_events(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "workspace", required_argument, NULL, 'w' },
		{ "types", required_argument, NULL, 't' },
		{ "since", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct station_events_options o = {};
	struct events_args a = {};
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hw:t:s:n:", options, NULL)) >= 0) {
		switch (opt) {
		case 'h':
			return cli_help(cli);
		case 'w':
			o.workspace = optarg;
			break;
		case 't':
			o.types = optarg;
			break;
		case 's':
			r = cli_parse_u64(cli, "--since", optarg, &o.since);
			if (r)
				return r;
			o.has_since = true;
			break;
		case 'n':
			r = cli_parse_u64(cli, "--count", optarg, &a.count);
			if (r)
				return r;
			break;
		default:
			return cli_option_error(cli, argv, opt);
		}
	}
	if (argc - optind != 0)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	station_client_set_interrupt(cli->client, interrupt_check, NULL);
	r = station_events(cli->client, &o, on_event, &a);
	station_client_set_interrupt(cli->client, NULL, NULL);
	if ((r == -EINTR && interrupted) || r == -ECANCELED)
		return 0;
	if (a.write_error < 0) {
		fprintf(stderr, "station-sandbox: cannot write the events: %s\n",
			strerror(-a.write_error));
		return EXIT_OUTPUT;
	}
	return r < 0 ? cli_fail(cli, r) : 0;
}

const struct cli_command cli_cmd_events = {
	.name = "events",
	.args = "[--workspace ID] [--types LIST] [--since SEQ] [--count N]",
	.summary = "print state changes of workspaces, runs, services, terminals as JSON lines",
	.help = "  --workspace ID  only this workspace's\n"
		"  --types LIST    only these: workspace,run,service,terminal\n"
		"  --since SEQ     resume after this event's seq (else: from now on)\n"
		"  --count N       exit after N events\n"
		"A dropped connection is resumed after the last event printed.\n",
	.run = cmd_events,
};
