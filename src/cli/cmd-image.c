/* SPDX-License-Identifier: MIT */
/* image import, pull, ls, rm, export: the container adapter's image store. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"

#define DIGEST_PREFIX "sha256:"
#define DIGEST_SIZE (sizeof(DIGEST_PREFIX) + 64) /* with the NUL */
#define SHORT_HEX 12

struct image_args {
	const char *name;
	const char *output; /* export: the file, "-" for stdout */
	struct station_pull_options pull;
	bool json;
};

/* Parses the options of an image command (those of longopts) and checks the count of the
 * arguments left: at least min, at most max. Returns < 0 to go on, else the exit status. */
static int image_parse(struct cli *cli, int argc, char **argv, const struct option *longopts,
		       int min, int max, struct image_args *a)
{
	const char *shortopts = ":h";
	int opt;

	for (const struct option *o = longopts; o->name; o++)
		if (o->val == 'o')
			shortopts = ":ho:"; /* -o FILE where --output is one */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) >= 0) {
		switch (opt) {
		case 'n':
			a->name = optarg;
			break;
		case 'r':
			a->pull.registry = optarg;
			break;
		case 'P':
			a->pull.plain_http = true;
			break;
		case 'j':
			a->json = true;
			break;
		case 'o':
			a->output = optarg;
			break;
		case 'h':
			return cli_help(cli);
		default:
			return cli_option_error(cli, argv, opt);
		}
	}
	if (argc - optind < min)
		return cli_usage(cli, "missing %.*s", (int)strcspn(cli->command->args, " "),
				 cli->command->args);
	if (argc - optind > max)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind + max]);
	return -1;
}

/* The digest of an image just made, or the whole image with --json. */
static int image_print(json_t *image, bool json)
{
	if (json)
		return output_json(image) < 0 ? EXIT_FAILED : 0;
	printf("%s\n", json_string_value(json_object_get(image, "digest")));
	return 0;
}

static int cmd_image_import(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	_cleanup_json_ json_t *image = NULL;
	_cleanup_free_ char *path = NULL;
	struct image_args a = {};
	int r;

	r = image_parse(cli, argc, argv, options, 1, 1, &a);
	if (r >= 0)
		return r;
	r = cli_absolute_path(cli, "PATH", argv[optind], &path);
	if (r != 0)
		return r;
	r = station_image_import(cli->client, path, a.name, &image);
	if (r < 0)
		return cli_fail(cli, r);
	return image_print(image, a.json);
}

static int cmd_image_pull(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "registry", required_argument, NULL, 'r' },
		{ "plain-http", no_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	_cleanup_json_ json_t *image = NULL;
	struct image_args a = {};
	int r;

	r = image_parse(cli, argc, argv, options, 1, 1, &a);
	if (r >= 0)
		return r;
	r = station_image_pull(cli->client, argv[optind], &a.pull, &image);
	if (r < 0)
		return cli_fail(cli, r);
	return image_print(image, a.json);
}

/* "1.5 MiB": binary units, one decimal above bytes. */
static const char *size_cell(const json_t *v, char *buf, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double n;
	size_t u = 0;

	if (!json_is_integer(v))
		return NULL;
	n = (double)json_integer_value(v);
	if (n < 1024) {
		snprintf(buf, size, "%.0f B", n);
		return buf;
	}
	for (n /= 1024; n >= 1024 && u + 1 < ELEMENTSOF(units); u++)
		n /= 1024;
	snprintf(buf, size, "%.1f %s", n, units[u]);
	return buf;
}

/* The first hex digits of a digest, as docker shows image ids. */
static const char *digest_cell(const char *digest, char *buf, size_t size)
{
	if (!digest || strncmp(digest, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) != 0)
		return digest;
	snprintf(buf, size, "%.*s", SHORT_HEX, digest + strlen(DIGEST_PREFIX));
	return buf;
}

/* "layers" is a count; an array of layers counts too. */
static const char *layers_cell(const json_t *v, char *buf, size_t size)
{
	if (json_is_array(v))
		snprintf(buf, size, "%zu", json_array_size(v));
	else if (json_is_integer(v))
		snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else
		return NULL;
	return buf;
}

static int image_ls_print(json_t *list)
{
	static const char *const header[] = { "DIGEST", "NAME", "SIZE", "LAYERS", "CREATED" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *img;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, img) {
		char digest[32], size[32], layers[32];
		const char *row[] = {
			digest_cell(json_string_value(json_object_get(img, "digest")), digest,
				    sizeof(digest)),
			json_string_value(json_object_get(img, "name")),
			size_cell(json_object_get(img, "size"), size, sizeof(size)),
			layers_cell(json_object_get(img, "layers"), layers, sizeof(layers)),
			json_string_value(json_object_get(img, "createdAt")),
		};

		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int cmd_image_ls(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	_cleanup_json_ json_t *list = NULL;
	struct image_args a = {};
	int r;

	r = image_parse(cli, argc, argv, options, 0, 0, &a);
	if (r >= 0)
		return r;
	r = station_image_list(cli->client, &list);
	if (r < 0)
		return cli_fail(cli, r);
	r = a.json ? output_json(list) : image_ls_print(list);
	return r < 0 ? EXIT_FAILED : 0;
}

/* A hex prefix of a digest, as `image ls` shows, with or without "sha256:"; NULL otherwise. */
static const char *digest_prefix(const char *ref)
{
	const char *hex = ref;

	if (strncmp(hex, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) == 0)
		hex += strlen(DIGEST_PREFIX);
	if (strchr(ref, '@') || !*hex || strlen(hex) >= 64 ||
	    strspn(hex, "0123456789abcdef") != strlen(hex))
		return NULL;
	return hex;
}

/* The full digest of the one image whose digest starts with the hex prefix. */
static int image_resolve(struct cli *cli, const char *ref, const char *hex, char ret[DIGEST_SIZE])
{
	_cleanup_json_ json_t *list = NULL;
	const char *found = NULL;
	size_t i, n = 0;
	json_t *img;
	int r;

	r = station_image_list(cli->client, &list);
	if (r < 0)
		return cli_fail(cli, r);
	json_array_foreach(list, i, img) {
		const char *d = json_string_value(json_object_get(img, "digest"));

		if (d && strncmp(d, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) == 0 &&
		    strncmp(d + strlen(DIGEST_PREFIX), hex, strlen(hex)) == 0) {
			found = d;
			n++;
		}
	}
	if (n != 1) {
		fprintf(stderr, "station-sandbox: %s '%s'\n",
			n ? "more than one image matches" : "no image matches", ref);
		return EXIT_FAILED;
	}
	snprintf(ret, DIGEST_SIZE, "%s", found);
	return 0;
}

static int image_rm_one(struct cli *cli, const char *ref)
{
	const char *hex = digest_prefix(ref);
	char digest[DIGEST_SIZE];
	int r;

	if (hex) {
		r = image_resolve(cli, ref, hex, digest);
		if (r != 0)
			return r;
		ref = digest;
	}
	r = station_image_remove(cli->client, ref, NULL);
	if (r < 0)
		return cli_fail(cli, r);
	printf("%s\n", ref);
	return 0;
}

static int cmd_image_rm(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct image_args a = {};
	int r, status = 0;

	r = image_parse(cli, argc, argv, options, 1, argc, &a);
	if (r >= 0)
		return r;
	for (int i = optind; i < argc; i++) {
		r = image_rm_one(cli, argv[i]);
		if (r == EXIT_NO_CONTROLLER)
			return r;
		if (r != 0)
			status = r;
		fflush(stdout);
	}
	return status;
}

/* The export into a temporary file beside path, renamed over it once whole: a failed export
 * leaves nothing behind (never half a tar). */
static int export_file(struct cli *cli, const char *ref, const char *path)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		fprintf(stderr, "station-sandbox: out of memory\n");
		return EXIT_FAILED;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "station-sandbox: cannot write '%s': %s\n", path, strerror(errno));
		return EXIT_FAILED;
	}
	fchmod(fd, 0666 & ~umask(umask(0)));
	r = station_image_export(cli->client, ref, fd, NULL);
	if (r < 0) {
		unlink(tmp);
		if (r == -ECONNRESET)
			fprintf(stderr,
				"station-sandbox: image export %s: the transfer was cut short (a "
				"damaged layer or the controller stopping: its log says which); "
				"'%s' not written\n",
				ref, path);
		return r == -ECONNRESET ? EXIT_FAILED : cli_fail(cli, r);
	}
	if (fsync(fd) < 0 || rename(tmp, path) < 0) {
		fprintf(stderr, "station-sandbox: cannot write '%s': %s\n", path, strerror(errno));
		unlink(tmp);
		return EXIT_FAILED;
	}
	return 0;
}

static int cmd_image_export(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct image_args a = {};
	int r;

	r = image_parse(cli, argc, argv, options, 1, 1, &a);
	if (r >= 0)
		return r;
	if (!a.output)
		return cli_usage(cli, "missing -o FILE (or -o - for stdout)");
	if (strcmp(a.output, "-") != 0)
		return export_file(cli, argv[optind], a.output);
	r = station_image_export(cli->client, argv[optind], STDOUT_FILENO, NULL);
	if (r == -ECONNRESET)
		fprintf(stderr,
			"station-sandbox: image export %s: the transfer was cut short (a damaged "
			"layer or the controller stopping: its log says which); what was written "
			"is not a whole tar\n",
			argv[optind]);
	return r == -ECONNRESET ? EXIT_FAILED : r < 0 ? cli_fail(cli, r) : 0;
}

static const struct cli_command image_import = {
	.name = "image import",
	.args = "PATH [--name NAME] [--json]",
	.summary = "import an OCI image layout (a directory or a tar) and print its digest",
	.help = "  PATH         the layout, on the controller's host (a relative path is made\n"
		"               absolute here)\n"
		"  --name NAME  a name to show in 'image ls'\n"
		"  --json       print the image as JSON\n",
	.run = cmd_image_import,
};

static const struct cli_command image_pull = {
	.name = "image pull",
	.args = "REF [--registry HOST:PORT] [--plain-http] [--json]",
	.summary = "pull an image by digest from a registry and print its digest",
	.help = "  REF                  [host[:port]/]name@sha256:<64 hex>\n"
		"  --registry HOST:PORT the registry to ask (default: REF's host)\n"
		"  --plain-http         http:// instead of https:// (a test registry on loopback)\n"
		"  --json               print the image as JSON\n",
	.run = cmd_image_pull,
};

static const struct cli_command image_ls = {
	.name = "image ls",
	.args = "[--json]",
	.summary = "list the images in the store",
	.help = "  --json  print the images as a JSON array\n",
	.run = cmd_image_ls,
};

static const struct cli_command image_rm = {
	.name = "image rm",
	.args = "REF...",
	.summary = "remove images (refused while a workspace uses one)",
	.help = "  REF  sha256:<64 hex>, name@sha256:<64 hex>, or a unique prefix of the digest as\n"
		"       'image ls' shows it\n",
	.run = cmd_image_rm,
};

static const struct cli_command image_export = {
	.name = "image export",
	.args = "REF -o FILE|-",
	.summary = "write an image as an OCI image layout tar (for 'image import' elsewhere)",
	.help = "  REF           sha256:<64 hex> or name@sha256:<64 hex>\n"
		"  -o, --output  the tar's file (written whole or not at all), or - for stdout\n",
	.run = cmd_image_export,
};

static const struct cli_command *const image_commands[] = {
	&image_import, &image_pull, &image_ls, &image_rm, &image_export,
};

static int cmd_image(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "image", image_commands, ELEMENTSOF(image_commands),
			    NULL, NULL);
}

const struct cli_command cli_cmd_image = {
	.name = "image",
	.args = "import|pull|ls|rm|export [ARGS]",
	.summary = "manage container images: import, pull, ls, rm, export",
	.help = "  import PATH [--name NAME]                      import an OCI image layout\n"
		"  pull REF [--registry HOST:PORT] [--plain-http] pull an image by digest\n"
		"  ls [--json]                                    list images\n"
		"  rm REF...                                      remove images\n"
		"  export REF -o FILE|-                           write an image as a layout tar\n"
		"'station-sandbox image COMMAND --help' describes a command.\n",
	.run = cmd_image,
};
