/* SPDX-License-Identifier: MIT */
/* The content-addressed store under <root>/images: blobs verified as they are written, one
 * index record per image, lookup, list, and removal with garbage collection. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "image/image-internal.h"

#define RECORD_MAX (1u << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);
static const char *digest_hex(const char *digest)
{
	return digest + strlen("sha256:");
}

static int path_join(char **ret, const char *a, const char *b)
{
	return asprintf(ret, "%s/%s", a, b) < 0 ? -ENOMEM : 0;
}

static int store_dirs_make(struct image_store *s)
{
	const char *dirs[] = { s->root, s->blobs, s->layers, s->index, s->trash };
	int r;

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		r = mkdir_p(dirs[i], 0700);
		if (r < 0)
			return r;
	}
	return chmod(s->root, 0700) < 0 ? negative_errno() : 0;
}

void image_store_close(struct image_store *s)
{
	if (!s)
		return;
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->root);
	free(s->blobs);
	free(s->layers);
	free(s->index);
	free(s->trash);
	free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct image_store *, image_store_close);

int image_store_open(const char *root, struct image_store **ret, struct station_error *e)
{
	_cleanup_(image_store_closep) struct image_store *s = calloc(1, sizeof *s);
	_cleanup_free_ char *lock = NULL;
	int r;

	if (!s)
		return -ENOMEM;
	s->lock_fd = -1;
	image_store_set_limits(s, NULL);
	if (path_join(&s->root, root, "images") < 0 ||
	    path_join(&s->blobs, s->root, "blobs/sha256") < 0 ||
	    path_join(&s->layers, s->root, "layers") < 0 ||
	    path_join(&s->index, s->root, "index") < 0 ||
	    path_join(&s->trash, s->root, "trash") < 0 || path_join(&lock, s->root, "lock") < 0)
		return -ENOMEM;
	r = store_dirs_make(s);
	if (r < 0)
		return station_error_set(e, r, NULL, "image store \"%s\": cannot create it: %s",
					 s->root, strerror(-r));
	s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "image store \"%s\": cannot open its lock: %m", s->root);
	*ret = TAKE_PTR(s);
	return 0;
}

void image_store_set_limits(struct image_store *s, const struct image_limits *l)
{
	s->limits = (struct image_limits){
		.max_layer_bytes = l && l->max_layer_bytes ? l->max_layer_bytes :
							     IMAGE_MAX_LAYER_BYTES_DEFAULT,
		.max_image_bytes = l && l->max_image_bytes ? l->max_image_bytes :
							     IMAGE_MAX_IMAGE_BYTES_DEFAULT,
		.max_image_entries = l && l->max_image_entries ? l->max_image_entries :
								 IMAGE_MAX_ENTRIES_DEFAULT,
	};
}

int image_store_trylock(struct image_store *s)
{
	while (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0)
		if (errno != EINTR)
			return errno == EWOULDBLOCK ? -EBUSY : negative_errno();
	return 0;
}

int image_store_lock(struct image_store *s)
{
	while (flock(s->lock_fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return negative_errno();
	return 0;
}

void image_store_unlock(struct image_store *s)
{
	flock(s->lock_fd, LOCK_UN);
}

static int fsync_dir(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return negative_errno();
	return fsync(fd) < 0 ? negative_errno() : 0;
}

/* transactions */

int image_txn_add(struct image_txn *t, const char *path)
{
	return strv_push(&t->added, path);
}

void image_txn_rollback(struct image_txn *t)
{
	for (size_t n = strv_length(t->added); n > 0; n--)
		(void)rm_rf(t->added[n - 1]);
	image_txn_done(t);
}

void image_txn_done(struct image_txn *t)
{
	strv_free(t->added);
	t->added = NULL;
}

/* blobs */

int blob_path(const struct image_store *s, const char *digest, char ret[PATH_MAX])
{
	if (!image_digest_is_valid(digest))
		return -EINVAL;
	snprintf(ret, PATH_MAX, "%s/%s", s->blobs, digest_hex(digest));
	return 0;
}

int blob_exists(const struct image_store *s, const char *digest, uint64_t *ret_size)
{
	char path[PATH_MAX];
	struct stat st;
	int r = blob_path(s, digest, path);

	if (r < 0)
		return r;
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EUCLEAN;
	if (ret_size)
		*ret_size = st.st_size;
	return 1;
}

int blob_read(const struct image_store *s, const char *digest, size_t max, char **ret,
	      size_t *ret_len)
{
	char path[PATH_MAX];
	int r = blob_path(s, digest, path);

	return r < 0 ? r : read_file(path, max, ret, ret_len);
}

int blob_writer_open(struct image_store *s, const char *digest, uint64_t expected_size,
		     struct blob_writer *ret)
{
	struct blob_writer w = { .fd = -1,
				 .expected_size = expected_size,
				 .defer_sync = s->defer_sync };
	int r = blob_path(s, digest, w.final);

	if (r < 0)
		return r;
	snprintf(w.digest, sizeof w.digest, "%s", digest);
	snprintf(w.tmp, sizeof w.tmp, "%s/.tmp-%.12s-XXXXXX", s->blobs, digest_hex(digest));
	w.fd = mkostemp(w.tmp, O_CLOEXEC);
	if (w.fd < 0)
		return negative_errno();
	sha256_init(&w.sha);
	*ret = w;
	return 0;
}

int blob_writer_write(struct blob_writer *w, const void *data, size_t n)
{
	if (w->expected_size != UINT64_MAX && w->size + n > w->expected_size)
		return -EFBIG;
	sha256_update(&w->sha, data, n);
	w->size += n;
	return write_all(w->fd, data, n);
}

void blob_writer_abort(struct blob_writer *w)
{
	if (w->fd < 0)
		return;
	close(w->fd);
	w->fd = -1;
	unlink(w->tmp);
}

static int blob_writer_verify(struct blob_writer *w, struct station_error *e)
{
	uint8_t sum[32];
	char hex[65];
	char dshort[DIGEST_SHORT_LEN];

	digest_short(w->digest, dshort);
	if (w->expected_size != UINT64_MAX && w->size != w->expected_size)
		return station_error_set(e, -EBADMSG, NULL,
					 "blob %s: size mismatch: got %llu bytes, expected %llu",
					 dshort, (unsigned long long)w->size,
					 (unsigned long long)w->expected_size);
	sha256_final(&w->sha, sum);
	hex_encode(sum, sizeof sum, hex);
	if (strcmp(hex, digest_hex(w->digest)) != 0)
		return station_error_set(e, -EBADMSG, NULL,
					 "blob %s: digest mismatch: content has sha256:%.12s",
					 dshort, hex);
	return 0;
}

int blob_writer_commit(struct blob_writer *w, struct image_txn *t, struct station_error *e)
{
	const char *slash = strrchr(w->final, '/');
	char dir[PATH_MAX];
	int r = blob_writer_verify(w, e);

	if (r >= 0 && (fchmod(w->fd, 0444) < 0 || (!w->defer_sync && fsync(w->fd) < 0)))
		r = negative_errno();
	if (r >= 0 && rename(w->tmp, w->final) < 0)
		r = negative_errno();
	if (r < 0) {
		blob_writer_abort(w);
		return r;
	}
	close(w->fd);
	w->fd = -1;
	snprintf(dir, sizeof dir, "%.*s", (int)(slash - w->final), w->final);
	r = image_txn_add(t, w->final);
	if (r >= 0 && !w->defer_sync)
		r = fsync_dir(dir);
	return r;
}

/* index records */

static int record_path(const struct image_store *s, const char *digest, char ret[PATH_MAX])
{
	if (!image_digest_is_valid(digest))
		return -EINVAL;
	snprintf(ret, PATH_MAX, "%s/%s.json", s->index, digest_hex(digest));
	return 0;
}

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static json_t *record_layers_json(const struct oci_manifest *m, char *const *diff_ids)
{
	json_t *layers = json_array();

	for (size_t i = 0; layers && i < m->n_layers; i++)
		json_array_append_new(
			layers, json_pack("{s:s, s:s, s:I, s:s}", "digest", m->layers[i].digest,
					  "mediaType", m->layers[i].media_type, "size",
					  (json_int_t)m->layers[i].size, "diffId", diff_ids[i]));
	return layers;
}

int image_record_write(struct image_store *s, const char *digest, const char *index_digest,
		       const char *name, const struct oci_manifest *m, char *const *diff_ids,
		       uint64_t size, struct station_error *e)
{
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];
	int r = record_path(s, digest, path);

	if (r < 0)
		return r;
	j = json_pack("{s:i, s:s, s:s, s:o, s:I, s:I}", "version", 1, "digest", digest, "config",
		      m->config.digest, "layers", record_layers_json(m, diff_ids), "size",
		      (json_int_t)size, "created", (json_int_t)now_usec());
	if (!j)
		return -ENOMEM;
	if (index_digest && *index_digest)
		json_object_set_new(j, "indexDigest", json_string(index_digest));
	if (name && *name)
		json_object_set_new(j, "name", json_string(name));
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	r = write_file_replace(path, text, strlen(text), 0600, !s->defer_sync);
	if (r < 0)
		return station_error_set(e, r, NULL, "image %s: cannot write its index record: %s",
					 digest, strerror(-r));
	return 0;
}

static int record_json_load(const char *path, json_t **ret)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	json_t *j;
	int r = read_file(path, RECORD_MAX, &data, &len);

	if (r < 0)
		return r;
	j = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "digest")) ||
	    !json_is_string(json_object_get(j, "config")) ||
	    !json_is_array(json_object_get(j, "layers"))) {
		json_decref(j);
		return -EUCLEAN;
	}
	*ret = j;
	return 0;
}

static const char *json_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void copy_digest(char dst[IMAGE_DIGEST_MAX], const char *src)
{
	snprintf(dst, IMAGE_DIGEST_MAX, "%s", src && image_digest_is_valid(src) ? src : "");
}

static int image_layers_from_record(struct image_store *s, json_t *layers, struct image *img,
				    struct station_error *e)
{
	json_t *l;
	size_t i;

	img->layers = calloc(json_array_size(layers) + 1, sizeof(char *));
	if (!img->layers)
		return -ENOMEM;
	json_array_foreach(layers, i, l) {
		const char *diff_id = json_str(l, "diffId");
		struct stat st;

		if (!diff_id || !image_digest_is_valid(diff_id))
			return -EUCLEAN;
		if (asprintf(&img->layers[i], "%s/%s", s->layers, digest_hex(diff_id)) < 0)
			return -ENOMEM;
		img->n_layers++;
		if (stat(img->layers[i], &st) == 0 && S_ISDIR(st.st_mode))
			continue;
		/* not unpacked yet (a snapshot's layer), or lost: made from its blob before use */
		if (blob_exists(s, json_str(l, "digest") ?: "", NULL) == 1)
			img->layers_pending = true;
		else
			return station_error_set(e, -EUCLEAN, NULL,
						 "image %s: layer %s is missing from the store "
						 "(remove the image and import it again)",
						 img->digest, diff_id);
	}
	return 0;
}

static int image_config_load(struct image_store *s, struct image *img, struct station_error *e)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r = blob_read(s, img->config_digest, IMAGE_CONFIG_MAX, &data, &len);

	if (r < 0)
		return station_error_set(e, r == -ENOENT ? -EUCLEAN : r, NULL,
					 "image %s: cannot read its config %s: %s", img->digest,
					 img->config_digest, strerror(-r));
	return image_config_parse(data, len, img->config_digest, &img->config, NULL, e);
}

static int image_from_record(struct image_store *s, json_t *j, struct image *ret,
			     struct station_error *e)
{
	struct image img = {};
	json_t *v;
	int r;

	copy_digest(img.digest, json_str(j, "digest"));
	copy_digest(img.index_digest, json_str(j, "indexDigest"));
	copy_digest(img.config_digest, json_str(j, "config"));
	if (!img.digest[0] || !img.config_digest[0])
		return -EUCLEAN;
	if (json_str(j, "name") && !(img.name = strdup(json_str(j, "name"))))
		return -ENOMEM;
	v = json_object_get(j, "size");
	img.size = json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
	v = json_object_get(j, "created");
	img.created = json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
	r = image_layers_from_record(s, json_object_get(j, "layers"), &img, e);
	if (r >= 0)
		r = image_config_load(s, &img, e);
	if (r < 0) {
		image_done(&img);
		return r;
	}
	*ret = img;
	return 0;
}

static int record_load(struct image_store *s, const char *path, struct image *ret,
		       struct station_error *e)
{
	_cleanup_json_ json_t *j = NULL;
	int r = record_json_load(path, &j);

	if (r == -EUCLEAN)
		return station_error_set(e, r, NULL, "image index record \"%s\" is corrupt", path);
	if (r < 0)
		return r;
	return image_from_record(s, j, ret, e);
}

/* Calls f for each record's JSON; stops at the first error f returns. */
static int records_foreach(struct image_store *s, int (*f)(json_t *j, const char *path, void *u),
			   void *userdata)
{
	_cleanup_(closedirp) DIR *d = opendir(s->index);
	struct dirent *de;

	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		_cleanup_json_ json_t *j = NULL;
		_cleanup_free_ char *path = NULL;
		size_t n = strlen(de->d_name);
		int r;

		if (de->d_name[0] == '.' || n < 5 || strcmp(de->d_name + n - 5, ".json") != 0)
			continue;
		if (path_join(&path, s->index, de->d_name) < 0)
			return -ENOMEM;
		if (record_json_load(path, &j) < 0)
			continue; /* a corrupt record hides one image, not the store */
		r = f(j, path, userdata);
		if (r != 0)
			return r;
	}
	return 0;
}

struct alias_search {
	const char *digest;
	char *path;
};

static int alias_match(json_t *j, const char *path, void *userdata)
{
	struct alias_search *a = userdata;
	const char *idx = json_str(j, "indexDigest");

	if (!idx || strcmp(idx, a->digest) != 0)
		return 0;
	a->path = strdup(path);
	return a->path ? 1 : -ENOMEM;
}

/* The record of the image with this manifest digest, or imported through this index digest. */
int image_record_find(struct image_store *s, const char *digest, char **ret)
{
	struct alias_search a = { .digest = digest };
	char path[PATH_MAX];
	int r = record_path(s, digest, path);

	if (r < 0)
		return r;
	if (access(path, F_OK) == 0)
		return (*ret = strdup(path)) ? 0 : -ENOMEM;
	r = records_foreach(s, alias_match, &a);
	if (r < 0)
		return r;
	if (!a.path)
		return -ENOENT;
	*ret = a.path;
	return 0;
}

/* ---- durability deferred (image_store_defer_sync()) ------------------------------------ */

#define VERIFY_BLOCK (1u << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free);

void image_store_defer_sync(struct image_store *s)
{
	s->defer_sync = true;
}

/* The blobs digest's record names: the manifest, the config, each layer (a strv). */
static int record_blobs(struct image_store *s, const char *digest, char ***ret,
			struct station_error *e)
{
	_cleanup_json_ json_t *j = NULL;
	char path[PATH_MAX];
	int r = record_path(s, digest, path);

	if (r >= 0)
		r = record_json_load(path, &j);
	if (r < 0)
		return station_error_set(e, r, NULL, "image %s: its index record: %s", digest,
					 r == -EUCLEAN ? "not a record" : strerror(-r));
	json_t *layers = json_object_get(j, "layers");
	size_t n = json_array_size(layers);
	char **v = calloc(n + 3, sizeof *v);
	const char *config = json_str(j, "config");

	if (!v)
		return -ENOMEM;
	r = config && image_digest_is_valid(config) ? 0 : -EUCLEAN;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		const char *d = json_str(json_array_get(layers, i), "digest");
		if (!d || !image_digest_is_valid(d))
			r = -EUCLEAN;
	}
	if (r < 0) {
		free(v);
		return station_error_set(e, r, NULL,
					 "image %s: its index record names an invalid "
					 "config or layer digest",
					 digest);
	}
	v[0] = strdup(digest);
	v[1] = strdup(config);
	for (size_t i = 0; i < n; i++)
		v[i + 2] = strdup(json_str(json_array_get(layers, i), "digest"));
	for (size_t i = 0; i < n + 2; i++)
		if (!v[i]) {
			for (size_t k = 0; k < n + 2; k++)
				free(v[k]);
			free(v);
			return -ENOMEM;
		}
	*ret = v;
	return 0;
}

static int path_fsync(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 || fsync(fd) < 0 ? negative_errno() : 0;
}

int image_sync(struct image_store *s, const char *digest, struct station_error *e)
{
	_cleanup_strv_free_ char **blobs = NULL;
	char path[PATH_MAX];
	int r = record_blobs(s, digest, &blobs, e);

	for (size_t i = 0; r >= 0 && blobs[i]; i++) {
		r = blob_path(s, blobs[i], path);
		if (r >= 0)
			r = path_fsync(path);
	}
	if (r >= 0)
		r = fsync_dir(s->blobs);
	if (r >= 0)
		r = record_path(s, digest, path);
	if (r >= 0)
		r = path_fsync(path);
	if (r >= 0)
		r = fsync_dir(s->index);
	if (r < 0 && !e->message[0])
		return station_error_set(e, r, NULL, "image %s: cannot write it to disk: %s",
					 digest, strerror(-r));
	return r;
}

/* 0 when the blob's content has its digest; -EBADMSG when not. */
static int blob_verify(struct image_store *s, const char *digest, char *buf,
		       struct station_error *e)
{
	_cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *sha = EVP_MD_CTX_new();
	_cleanup_close_ int fd = -1;
	uint8_t sum[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	char path[PATH_MAX], hex[65];
	struct stat st;
	int r = blob_path(s, digest, path);

	if (r < 0)
		return r;
	if (!sha || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return station_error_set(e, negative_errno(), NULL, "blob %s: %m", digest);
	if (!S_ISREG(st.st_mode))
		return station_error_set(e, -EBADMSG, NULL, "blob %s: not a regular file", digest);
	for (;;) {
		ssize_t n = read(fd, buf, VERIFY_BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return station_error_set(e, negative_errno(), NULL, "blob %s: %m", digest);
		if (n == 0)
			break;
		if (EVP_DigestUpdate(sha, buf, (size_t)n) != 1)
			return -ENOMEM;
	}
	if (EVP_DigestFinal_ex(sha, sum, &len) != 1 || len != 32)
		return -ENOMEM;
	hex_encode(sum, 32, hex);
	if (strcmp(hex, digest_hex(digest)) != 0)
		return station_error_set(e, -EBADMSG, NULL,
					 "blob %s: its content has sha256:%.12s, not its digest",
					 digest, hex);
	return 0;
}

int image_verify(struct image_store *s, const char *digest, struct station_error *e)
{
	_cleanup_strv_free_ char **blobs = NULL;
	_cleanup_free_ char *buf = malloc(VERIFY_BLOCK);
	int r = buf ? record_blobs(s, digest, &blobs, e) : -ENOMEM;

	for (size_t i = 0; r >= 0 && blobs[i]; i++)
		r = blob_verify(s, blobs[i], buf, e);
	return r;
}

int image_error_not_in_store(const char *ref, struct station_error *e)
{
	return station_error_set(e, -ENOENT, "image",
				 "image %s not in store (import it with 'station-sandbox image "
				 "import' or pull it with 'station-sandbox image pull')",
				 ref);
}

int image_lookup(struct image_store *s, const char *ref, struct image **ret,
		 struct station_error *e)
{
	_cleanup_free_ struct image *img = NULL;
	_cleanup_free_ char *path = NULL;
	struct image_ref parsed;
	int r = image_ref_parse(ref, &parsed, e);

	if (r < 0)
		return r;
	r = image_record_find(s, parsed.digest, &path);
	if (r == -ENOENT)
		return image_error_not_in_store(ref, e);
	if (r < 0)
		return station_error_set(e, r, NULL, "image %s: cannot read the store: %s", ref,
					 strerror(-r));
	img = calloc(1, sizeof *img);
	if (!img)
		return -ENOMEM;
	r = record_load(s, path, img, e);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(img);
	return 0;
}

struct image_list_acc {
	struct image_store *s;
	struct image *imgs;
	size_t n;
};

static int list_add(json_t *j, const char *path, void *userdata)
{
	struct image_list_acc *acc = userdata;
	struct image *nl = realloc(acc->imgs, (acc->n + 1) * sizeof *nl);

	if (!nl)
		return -ENOMEM;
	acc->imgs = nl;
	if (image_from_record(acc->s, j, &acc->imgs[acc->n], NULL) >= 0)
		acc->n++;
	return 0;
}

static int image_cmp_created(const void *a, const void *b)
{
	const struct image *x = a, *y = b;

	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->digest, y->digest);
}

int image_list(struct image_store *s, struct image **ret, size_t *ret_n)
{
	struct image_list_acc acc = { .s = s };
	int r = records_foreach(s, list_add, &acc);

	if (r < 0) {
		image_free_array(acc.imgs, acc.n);
		return r;
	}
	if (acc.n > 0)
		qsort(acc.imgs, acc.n, sizeof *acc.imgs, image_cmp_created);
	*ret = acc.imgs;
	*ret_n = acc.n;
	return 0;
}

/* garbage collection */

struct gc_refs {
	char **blobs;  /* hex digests still referenced */
	char **layers; /* hex diff ids still referenced */
};

static int gc_ref_add(char ***l, const char *digest)
{
	if (!digest || !image_digest_is_valid(digest))
		return 0;
	return strv_push(l, digest_hex(digest));
}

static int gc_collect(json_t *j, const char *path, void *userdata)
{
	struct gc_refs *refs = userdata;
	json_t *l;
	size_t i;
	int r = gc_ref_add(&refs->blobs, json_str(j, "digest"));

	if (r >= 0)
		r = gc_ref_add(&refs->blobs, json_str(j, "indexDigest"));
	if (r >= 0)
		r = gc_ref_add(&refs->blobs, json_str(j, "config"));
	json_array_foreach(json_object_get(j, "layers"), i, l) {
		if (r >= 0)
			r = gc_ref_add(&refs->blobs, json_str(l, "digest"));
		if (r >= 0)
			r = gc_ref_add(&refs->layers, json_str(l, "diffId"));
	}
	return r < 0 ? r : 0;
}

static bool strv_contains(char *const *l, const char *s)
{
	for (size_t i = 0; l && l[i]; i++)
		if (strcmp(l[i], s) == 0)
			return true;
	return false;
}

/* Removes every entry of dir not named in keep (leftover temporaries included). A directory
 * (an unpacked layer) is first renamed into the trash and removed from there: a removal cut
 * short (the controller killed, the disk failing) never leaves a partial tree under a layer's
 * name, which an import would take for the whole layer. */
static int gc_dir(struct image_store *s, const char *dir, char *const *keep)
{
	static unsigned long seq;
	_cleanup_(closedirp) DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		_cleanup_free_ char *path = NULL, *to = NULL;
		struct stat st;
		int k = 0;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    strv_contains(keep, de->d_name))
			continue;
		if (path_join(&path, dir, de->d_name) < 0)
			return -ENOMEM;
		if (lstat(path, &st) < 0) {
			k = errno == ENOENT ? 0 : negative_errno();
		} else if (!S_ISDIR(st.st_mode)) {
			k = unlink(path) < 0 && errno != ENOENT ? negative_errno() : 0;
		} else {
			if (asprintf(&to, "%s/%.80s.%ld.%lu", s->trash, de->d_name, (long)getpid(),
				     __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED)) < 0)
				return -ENOMEM;
			k = rename(path, to) < 0 && errno != ENOENT ? negative_errno() : 0;
		}
		if (k < 0 && r >= 0)
			r = k;
	}
	return r;
}

/* Empties the trash: what removals renamed there, and what one cut short left. */
static int trash_empty(struct image_store *s)
{
	_cleanup_(closedirp) DIR *d = opendir(s->trash);
	struct dirent *de;
	int r = 0;

	if (!d)
		return errno == ENOENT ? 0 : negative_errno();
	while ((de = readdir(d))) {
		_cleanup_free_ char *path = NULL;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (path_join(&path, s->trash, de->d_name) < 0)
			return -ENOMEM;
		int k = rm_rf(path);
		if (k < 0 && r >= 0)
			r = k;
	}
	return r;
}

int image_store_gc(struct image_store *s)
{
	struct gc_refs refs = {};
	int r = records_foreach(s, gc_collect, &refs);

	if (r >= 0)
		r = gc_dir(s, s->blobs, refs.blobs);
	if (r >= 0)
		r = gc_dir(s, s->layers, refs.layers);
	if (r >= 0)
		r = trash_empty(s);
	strv_free(refs.blobs);
	strv_free(refs.layers);
	return r;
}

int image_store_clean(struct image_store *s, struct station_error *e)
{
	int r = image_store_trylock(s);

	if (r == -EBUSY)
		return station_error_set(e, r, NULL,
					 "image store: busy with an import, pull or removal");
	if (r < 0)
		return station_error_set(e, r, NULL, "image store: cannot lock: %s", strerror(-r));
	r = image_store_gc(s);
	image_store_unlock(s);
	if (r < 0)
		return station_error_set(e, r, NULL,
					 "image store: cannot free unused blobs and layers: %s",
					 strerror(-r));
	return 0;
}

int image_remove(struct image_store *s, const char *ref, struct station_error *e)
{
	_cleanup_free_ char *path = NULL;
	struct image_ref parsed;
	int r = image_ref_parse(ref, &parsed, e);

	if (r < 0)
		return r;
	/* Never waits: an import or pull holds the lock for its whole transfer. */
	r = image_store_trylock(s);
	if (r == -EBUSY)
		return station_error_set(e, r, NULL,
					 "image %s: the image store is busy with an import, pull "
					 "or another removal; remove it when that has finished",
					 ref);
	if (r < 0)
		return station_error_set(e, r, NULL, "image store: cannot lock: %s", strerror(-r));
	r = image_record_find(s, parsed.digest, &path);
	if (r == -ENOENT)
		r = image_error_not_in_store(ref, e);
	else if (r >= 0 && unlink(path) < 0)
		r = station_error_set(e, negative_errno(), NULL, "image %s: cannot remove: %m",
				      ref);
	if (r >= 0) {
		(void)fsync_dir(s->index);
		r = image_store_gc(s);
		if (r < 0)
			r = station_error_set(e, r, NULL,
					      "image %s removed, but freeing its blobs and layers "
					      "failed: %s",
					      ref, strerror(-r));
	}
	image_store_unlock(s);
	return r;
}

/* layers unpacked on first use */

static int layers_unpack_locked(struct image_store *s, const struct image *img,
				struct station_error *e)
{
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *path = NULL;
	struct image_budget b = {};
	struct image_txn t = {};
	json_t *l;
	size_t i;
	int r = image_record_find(s, img->digest, &path);

	if (r >= 0)
		r = record_json_load(path, &j);
	if (r == -ENOENT)
		return image_error_not_in_store(img->digest, e);
	if (r < 0)
		return station_error_set(e, r, NULL, "image %s: cannot read its record: %s",
					 img->digest, strerror(-r));
	json_array_foreach(json_object_get(j, "layers"), i, l) {
		struct oci_descriptor d = {};
		const char *diff_id = json_str(l, "diffId");

		if (!json_str(l, "digest") || !diff_id || !image_digest_is_valid(diff_id))
			return station_error_set(e, -EUCLEAN, NULL,
						 "image index record \"%s\" is corrupt", path);
		snprintf(d.digest, sizeof d.digest, "%s", json_str(l, "digest"));
		r = layer_unpack(s, &t, &d, diff_id, &b, e); /* a layer there already is kept */
		image_txn_done(&t);
		if (r < 0)
			return r;
	}
	return fsync_dir(s->layers);
}

int image_layers_unpack(struct image_store *s, struct image *img, struct station_error *e)
{
	_cleanup_free_ char *lock = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (!img->layers_pending)
		return 0;
	/* A lock of its own: the store handle's fd may be shared by threads, which one flock()
	 * on it would not keep apart. */
	if (path_join(&lock, s->root, "lock") < 0)
		return -ENOMEM;
	fd = open(lock, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "image store: cannot open its lock: %m");
	while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return station_error_set(e, negative_errno(), NULL, "image store: cannot lock: %m");
	r = layers_unpack_locked(s, img, e);
	if (r >= 0)
		img->layers_pending = false;
	return r; /* the lock goes with fd */
}

/* struct image */

void image_done(struct image *img)
{
	free(img->name);
	image_config_done(&img->config);
	strv_free(img->layers);
	*img = (struct image){};
}

void image_free(struct image *img)
{
	if (!img)
		return;
	image_done(img);
	free(img);
}

void image_free_array(struct image *imgs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		image_done(&imgs[i]);
	free(imgs);
}

int image_overlay_lowerdir(const struct image *img, char **ret)
{
	size_t len = 1;
	char *s, *p;

	if (img->n_layers == 0)
		return -EINVAL;
	for (size_t i = 0; i < img->n_layers; i++)
		len += strlen(img->layers[i]) + 1;
	s = p = malloc(len);
	if (!s)
		return -ENOMEM;
	for (size_t i = img->n_layers; i > 0; i--)
		p = stpcpy(stpcpy(p, img->layers[i - 1]), i > 1 ? ":" : "");
	*ret = s;
	return 0;
}
