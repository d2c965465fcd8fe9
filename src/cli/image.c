/* SPDX-License-Identifier: Apache-2.0 */
/* run --image: the image is unpacked into the cache by kiwi-rootfs, run as
 * a child process and only when --image is given. Linking the image code
 * into kiwi-run would load libarchive and its chain of libraries (down to
 * ICU through libxml2) into every sandbox start. */
#include "image.h"
#include "cli.h"
#include "kiwi/cleanup.h"
#include "kiwi/json.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <unistd.h>

/* kiwi-rootfs beside kiwi-run (installed), or in the build tree's
 * rootfs-tools/, or where KIWI_ROOTFS_BIN says. */
static int find_kiwi_rootfs(char *out, size_t len)
{
	const char *env = secure_getenv("KIWI_ROOTFS_BIN");
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, X_OK);
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	static const char *const places[] = { "/kiwi-rootfs", "/../rootfs-tools/kiwi-rootfs" };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(places); i++) {
		if (strlen(self) + strlen(places[i]) >= len)
			return -1;
		strcpy(out, self);
		strcat(out, places[i]);
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

int kiwi_cli_rootfs_run(const char *what, const char *const *args, const int *keep, size_t n_keep, char *line,
			size_t len, kiwi_err *err)
{
	char tool[PATH_MAX];
	if (find_kiwi_rootfs(tool, sizeof(tool)) < 0)
		return kiwi_error(err, ENOENT, "image", "cannot find kiwi-rootfs next to kiwi-run "
				  "(set KIWI_ROOTFS_BIN)");
	const char *argv[96] = { tool };
	for (size_t i = 0; args[i] && i + 2 < KIWI_ARRAY_SIZE(argv); i++)
		argv[i + 1] = args[i];
	/* stdout and stderr share the pipe: the last line is the result, or
	 * the one line that says why there is none. */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return kiwi_error(err, errno, "image", "cannot create a pipe");
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* Never outlives the kiwi-run that asked: a snapshot goes on
		 * reading a session its death thawed; a restore, a sandbox
		 * that is gone. Its scratch is gc's (kiwi-run gc, kiwi-rootfs gc). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(127);
		dup2(p[1], STDOUT_FILENO);
		dup2(p[1], STDERR_FILENO);
		for (size_t i = 0; i < n_keep; i++)
			fcntl(keep[i], F_SETFD, 0);
		execv(tool, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	_cleanup_close_ int rd = p[0];
	if (pid < 0)
		return kiwi_error(err, errno, "image", "cannot start kiwi-rootfs");
	/* Drained to the end, whatever the length (progress events come
	 * before the result); only the lines at the tail are kept. */
	const size_t cap = 1 << 16;
	_cleanup_free_ char *out = calloc(1, cap);
	size_t used = 0;
	ssize_t n;
	while (out && (n = read(rd, out + used, cap - 1 - used)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		used += (size_t)n;
		if (used == cap - 1) {
			size_t keep_len = cap / 2;
			memmove(out, out + used - keep_len, keep_len);
			used = keep_len;
		}
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!out)
		return kiwi_error(err, ENOMEM, "image", "cannot read kiwi-rootfs's answer");
	out[used] = '\0';
	while (used > 0 && out[used - 1] == '\n')
		out[--used] = '\0';
	char *last = strrchr(out, '\n');
	last = last ? last + 1 : out;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		/* With --json, kiwi-rootfs reports {"event":"error","message":...}. */
		_cleanup_json_ kiwi_json *ev = kiwi_json_parse(last, strlen(last), NULL);
		const char *why = kiwi_json_string(kiwi_json_get(ev, "message"));
		if (!why)
			why = strncmp(last, "kiwi-rootfs: ", 13) ? last : last + 13;
		return kiwi_error(err, 0, "image", "cannot %s: %s", what, *why ? why : "kiwi-rootfs failed");
	}
	snprintf(line, len, "%s", last);
	return 0;
}

/* Runs kiwi-rootfs unpack --cache --json and returns its last line. */
static int unpack_into_cache(const char *ref, const char *cache_dir, char *line, size_t len,
			     kiwi_err *err)
{
	const char *args[] = { "unpack", "--cache", "--json", ref, NULL, NULL, NULL };
	if (cache_dir) {
		args[3] = "--cache-dir";
		args[4] = cache_dir;
		args[5] = ref;
	}
	char what[512];
	snprintf(what, sizeof(what), "unpack `%s`", ref);
	return kiwi_cli_rootfs_run(what, args, NULL, 0, line, len, err);
}

static void free_strv(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

void kiwi_cli_image_clear(struct kiwi_cli_image *img)
{
	free(img->rootfs);
	free_strv(img->env);
	free_strv(img->entrypoint);
	free_strv(img->cmd);
	free(img->working_dir);
	if (img->pin_fd >= 0)
		close(img->pin_fd);
	*img = (struct kiwi_cli_image){ .pin_fd = -1 };
}

/* A JSON array of strings as a NULL-terminated vector; null gives NULL
 * with ok set, anything else fails. */
static char **string_array(const kiwi_json *j, bool *ok)
{
	*ok = kiwi_json_type_of(j) == KIWI_JSON_NULL;
	if (*ok || kiwi_json_type_of(j) != KIWI_JSON_ARRAY)
		return NULL;
	size_t n = kiwi_json_len(j);
	char **v = calloc(n + 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++) {
		const char *s = kiwi_json_string(kiwi_json_at(j, i));
		if (!s || !(v[i] = strdup(s))) {
			free_strv(v);
			return NULL;
		}
	}
	*ok = v != NULL;
	return v;
}

static int read_image_config(const char *entry, struct kiwi_cli_image *img, kiwi_err *err)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/image.json", entry);
	_cleanup_json_ kiwi_json *root = kiwi_json_parse_file(path, 1 << 20, err);
	if (!root)
		return -1;
	const kiwi_json *j = kiwi_json_get(root, "config");
	static const char *const lists[] = { "Env", "Entrypoint", "Cmd" };
	char ***slots[] = { &img->env, &img->entrypoint, &img->cmd };
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(lists); i++) {
		const kiwi_json *v = kiwi_json_get(j, lists[i]);
		bool ok = true;
		if (v)
			*slots[i] = string_array(v, &ok);
		if (!ok)
			return kiwi_error(err, EINVAL, "image", "`%s`: %s is not a list of strings", path,
					  lists[i]);
	}
	const char *wd = kiwi_json_string(kiwi_json_get(j, "WorkingDir"));
	if (wd && *wd)
		img->working_dir = strdup(wd);
	return 0;
}

int kiwi_cli_image_resolve(const char *ref, const char *cache_dir, struct kiwi_cli_image *img,
			   kiwi_err *err)
{
	/* gc may remove an entry between kiwi-rootfs's exit and our lock:
	 * then the lock finds no entry, and one more round unpacks it again. */
	for (int round = 0; round < 2; round++) {
		char line[PATH_MAX + 1024];
		if (unpack_into_cache(ref, cache_dir, line, sizeof(line), err) < 0)
			return -1;
		_cleanup_json_ kiwi_json *j = kiwi_json_parse(line, strlen(line), err);
		const char *rootfs = kiwi_json_string(kiwi_json_get(j, "rootfs"));
		if (!rootfs)
			return kiwi_error(err, EPROTO, "image", "kiwi-rootfs did not name the rootfs");
		char entry[PATH_MAX], lock[PATH_MAX + 8];
		snprintf(entry, sizeof(entry), "%s", rootfs);
		char *slash = strrchr(entry, '/');
		if (!slash || strcmp(slash, "/rootfs"))
			return kiwi_error(err, EPROTO, "image", "unexpected rootfs `%s`", rootfs);
		*slash = '\0';
		snprintf(lock, sizeof(lock), "%s.lock", entry);
		int fd = open(lock, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd >= 0 && flock(fd, LOCK_SH) == 0 && stat(rootfs, &st) == 0 && S_ISDIR(st.st_mode)) {
			img->pin_fd = fd;
			img->rootfs = strdup(rootfs);
			return read_image_config(entry, img, err);
		}
		if (fd >= 0)
			close(fd);
	}
	return kiwi_error(err, ENOENT, "image", "the cache entry of `%s` keeps disappearing", ref);
}
