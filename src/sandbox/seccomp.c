/* SPDX-License-Identifier: Apache-2.0 */
/* OCI `linux.seccomp` profile -> libseccomp -> classic BPF held in memory.
 *
 * Compiling happens once, in the parent; the child only hands the finished
 * program to seccomp(2). Three things are added around what libseccomp
 * generates, as a short prefix program (see build_prefix):
 *  - syscall numbers above the highest one the profile names answer ENOSYS,
 *    so code running on a newer kernel than the profile falls back the way
 *    it does on an older kernel, instead of failing with EPERM;
 *  - the x32 ABI (x86-64 arch with bit 30 set in the number) is killed
 *    unless the profile lists SCMP_ARCH_X32: libseccomp 2.5 would give it
 *    the default action, which for a denylist profile means ALLOW;
 *  - every other architecture the profile does not list (i386 through
 *    int 0x80) is killed by libseccomp's bad-arch action.
 * The format and the choices are documented in kiwi-run-seccomp(5). */
#include "kiwi/seccomp.h"
#include "seccomp_internal.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"
#include "kiwi/json.h"
#include "kiwi/siphash.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#define MAX_ARCHES 16
#define X32_SYSCALL_BIT 0x40000000u
/* libseccomp refuses a rule whose action equals the default one, which
 * would make "allow ioctl, but EPERM for TIOCSTI" impossible under an
 * EPERM default. So the filter is built with this placeholder default,
 * which no profile can name (errnoRet is capped at 4095), and its RET
 * instructions are rewritten to the real default after export. */
#define PLACEHOLDER_DEFAULT SCMP_ACT_TRACE(0xfffe)
#define MAX_ERRNO_RET 4095

struct compiler {
	scmp_filter_ctx ctx;
	const char *origin;
	kiwi_err *err;
	uint32_t default_action;
	unsigned int flags;
	uint32_t arches[MAX_ARCHES];   /* libseccomp tokens, native first */
	int max_nr[MAX_ARCHES];        /* highest syscall the profile names */
	size_t n_arches;
};

static void ctx_releasep(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

/* A malformed profile: no errno applies, so none is printed after it. */
__attribute__((format(printf, 3, 4)))
static int bad(struct compiler *c, const char *where, const char *fmt, ...)
{
	char why[KIWI_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return kiwi_error(c->err, 0, "seccomp", "profile `%s`: %s: %s", c->origin, where, why);
}

/* Formats the JSON path of the member being read, for error messages;
 * truncating a deep path is harmless. */
__attribute__((format(printf, 3, 4)))
static const char *path(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return buf;
}

static int check_keys(struct compiler *c, const kiwi_json *obj, const char *where,
		      const char *const *known)
{
	if (kiwi_json_type_of(obj) != KIWI_JSON_OBJECT)
		return bad(c, where, "must be an object, not %s",
			   kiwi_json_type_name(kiwi_json_type_of(obj)));
	for (size_t i = 0; i < kiwi_json_len(obj); i++) {
		const char *key = kiwi_json_key_at(obj, i);
		size_t k = 0;
		while (known[k] && strcmp(known[k], key))
			k++;
		/* A typo such as "syscall" must not silently weaken the profile. */
		if (!known[k])
			return bad(c, where, "unknown field `%s`", key);
	}
	return 0;
}

static int get_string(struct compiler *c, const kiwi_json *v, const char *where, const char **out)
{
	*out = kiwi_json_string(v);
	if (!*out)
		return bad(c, where, "must be a string, not %s",
			   kiwi_json_type_name(kiwi_json_type_of(v)));
	return 0;
}

static int get_array(struct compiler *c, const kiwi_json *v, const char *where)
{
	if (kiwi_json_type_of(v) != KIWI_JSON_ARRAY)
		return bad(c, where, "must be an array, not %s",
			   kiwi_json_type_name(kiwi_json_type_of(v)));
	return 0;
}

typedef int item_fn(struct compiler *c, const kiwi_json *item, const char *where);

/* Calls fn on each item of the array v (absent is empty), naming each
 * `name[i]` in errors. */
static int each_item(struct compiler *c, const kiwi_json *v, const char *name, item_fn *fn)
{
	if (!v)
		return 0;
	if (get_array(c, v, name) < 0)
		return -1;
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		char where[128];
		if (fn(c, kiwi_json_at(v, i), path(where, sizeof(where), "%s[%zu]", name, i)) < 0)
			return -1;
	}
	return 0;
}

static int get_uint(struct compiler *c, const kiwi_json *v, const char *where,
		    unsigned long long max, unsigned long long *out)
{
	long long n;
	if (!kiwi_json_int(v, &n) || n < 0 || (unsigned long long)n > max)
		return bad(c, where, "must be an integer from 0 to %llu", max);
	*out = (unsigned long long)n;
	return 0;
}

/* Short reads are retried; end of file early is EIO. */
static bool read_all(int fd, void *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = read(fd, (char *)buf + done, len - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = EIO;
		if (r <= 0)
			return false;
		done += (size_t)r;
	}
	return true;
}

struct kiwi_seccomp *kiwi_seccomp_alloc(size_t n_insns, unsigned int flags)
{
	struct kiwi_seccomp *f = malloc(sizeof(*f) + n_insns * sizeof(struct sock_filter));
	if (!f)
		return NULL;
	f->prog.len = (unsigned short)n_insns;
	f->prog.filter = f->insns;
	f->flags = flags;
	f->builtin = false;
	return f;
}

/* ---- actions, architectures, operators, flags ---- */

struct action_name {
	const char *name;
	uint32_t action;
	bool takes_errno;
};

static const struct action_name actions[] = {
	{ "SCMP_ACT_KILL", SCMP_ACT_KILL_THREAD, false },
	{ "SCMP_ACT_KILL_THREAD", SCMP_ACT_KILL_THREAD, false },
	{ "SCMP_ACT_KILL_PROCESS", SCMP_ACT_KILL_PROCESS, false },
	{ "SCMP_ACT_TRAP", SCMP_ACT_TRAP, false },
	{ "SCMP_ACT_ERRNO", SCMP_ACT_ERRNO(0), true },
	{ "SCMP_ACT_TRACE", SCMP_ACT_TRACE(0), true },
	{ "SCMP_ACT_ALLOW", SCMP_ACT_ALLOW, false },
	{ "SCMP_ACT_LOG", SCMP_ACT_LOG, false },
};

/* errno_v is the errnoRet/defaultErrnoRet member, or NULL when absent. */
static int parse_action(struct compiler *c, const kiwi_json *v, const char *where,
			const kiwi_json *errno_v, const char *errno_where, uint32_t *out)
{
	const char *name;
	if (get_string(c, v, where, &name) < 0)
		return -1;
	if (!strcmp(name, "SCMP_ACT_NOTIFY"))
		return bad(c, where, "SCMP_ACT_NOTIFY is not supported: kiwi-run runs no seccomp agent");
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(actions); i++) {
		if (strcmp(actions[i].name, name))
			continue;
		if (!actions[i].takes_errno) {
			if (errno_v)
				return bad(c, errno_where, "only SCMP_ACT_ERRNO and SCMP_ACT_TRACE take one, not %s", name);
			*out = actions[i].action;
			return 0;
		}
		unsigned long long e = EPERM;
		if (errno_v && get_uint(c, errno_v, errno_where, MAX_ERRNO_RET, &e) < 0)
			return -1;
		*out = actions[i].action | (uint32_t)e;
		return 0;
	}
	return bad(c, where, "unknown action `%s`", name);
}

/* "SCMP_ARCH_X86_64" -> libseccomp's "x86_64" -> its token. */
static int parse_arch(struct compiler *c, const kiwi_json *v, const char *where, uint32_t *out)
{
	const char *name;
	if (get_string(c, v, where, &name) < 0)
		return -1;
	static const char prefix[] = "SCMP_ARCH_";
	char lower[32];
	size_t n = strlen(name);
	if (strncmp(name, prefix, sizeof(prefix) - 1) || n - (sizeof(prefix) - 1) >= sizeof(lower))
		return bad(c, where, "unknown architecture `%s`", name);
	for (size_t i = sizeof(prefix) - 1; i <= n; i++)
		lower[i - (sizeof(prefix) - 1)] = (char)tolower((unsigned char)name[i]);
	*out = seccomp_arch_resolve_name(lower);
	if (!*out)
		return bad(c, where, "unknown architecture `%s`", name);
	return 0;
}

static int add_arch(struct compiler *c, uint32_t arch, const char *where)
{
	for (size_t i = 0; i < c->n_arches; i++)
		if (c->arches[i] == arch)
			return 0;
	if (c->n_arches == MAX_ARCHES)
		return bad(c, where, "more than %d architectures", MAX_ARCHES);
	int rc = seccomp_arch_add(c->ctx, arch);
	if (rc < 0 && rc != -EEXIST)
		return kiwi_error(c->err, -rc, "seccomp", "profile `%s`: %s: libseccomp cannot add the architecture",
				  c->origin, where);
	c->max_nr[c->n_arches] = -1;
	c->arches[c->n_arches++] = arch;
	return 0;
}

static const struct {
	const char *name;
	enum scmp_compare op;
} ops[] = {
	{ "SCMP_CMP_NE", SCMP_CMP_NE },
	{ "SCMP_CMP_LT", SCMP_CMP_LT },
	{ "SCMP_CMP_LE", SCMP_CMP_LE },
	{ "SCMP_CMP_EQ", SCMP_CMP_EQ },
	{ "SCMP_CMP_GE", SCMP_CMP_GE },
	{ "SCMP_CMP_GT", SCMP_CMP_GT },
	{ "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
};

static const struct {
	const char *name;
	unsigned int flag;
} filter_flags[] = {
	{ "SECCOMP_FILTER_FLAG_TSYNC", SECCOMP_FILTER_FLAG_TSYNC },
	{ "SECCOMP_FILTER_FLAG_LOG", SECCOMP_FILTER_FLAG_LOG },
	{ "SECCOMP_FILTER_FLAG_SPEC_ALLOW", SECCOMP_FILTER_FLAG_SPEC_ALLOW },
};

static int parse_flag(struct compiler *c, const kiwi_json *v, const char *where)
{
	const char *name;
	if (get_string(c, v, where, &name) < 0)
		return -1;
	for (size_t k = 0; k < KIWI_ARRAY_SIZE(filter_flags); k++) {
		if (!strcmp(filter_flags[k].name, name)) {
			c->flags |= filter_flags[k].flag;
			return 0;
		}
	}
	return bad(c, where, "unknown or unsupported flag `%s`", name);
}

/* ---- architectures ---- */

static int add_named_arch(struct compiler *c, const kiwi_json *v, const char *where)
{
	uint32_t arch;
	if (parse_arch(c, v, where, &arch) < 0)
		return -1;
	return add_arch(c, arch, where);
}

/* Docker's format: when "architectures" is absent, the archMap entry for
 * the native architecture names it and its sub-architectures. */
static int add_arch_map_entry(struct compiler *c, const kiwi_json *entry, const char *where)
{
	static const char *const keys[] = { "architecture", "subArchitectures", NULL };
	char w[160];
	if (check_keys(c, entry, where, keys) < 0)
		return -1;
	uint32_t arch;
	path(w, sizeof(w), "%s.architecture", where);
	if (parse_arch(c, kiwi_json_get(entry, "architecture"), w, &arch) < 0)
		return -1;
	if (arch != seccomp_arch_native())
		return 0;
	path(w, sizeof(w), "%s.subArchitectures", where);
	return each_item(c, kiwi_json_get(entry, "subArchitectures"), w, add_named_arch);
}

/* ---- docker's per-rule conditions: includes / excludes ---- */

#if defined(__x86_64__)
#define GO_ARCH "amd64"
#elif defined(__aarch64__)
#define GO_ARCH "arm64"
#elif defined(__i386__)
#define GO_ARCH "386"
#elif defined(__riscv) && __riscv_xlen == 64
#define GO_ARCH "riscv64"
#elif defined(__s390x__)
#define GO_ARCH "s390x"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define GO_ARCH "ppc64le"
#else
#define GO_ARCH "unknown"
#endif

static bool kernel_at_least(const char *want)
{
	struct utsname u;
	unsigned have_major = 0, have_minor = 0, want_major = 0, want_minor = 0;
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &have_major, &have_minor) < 1)
		return false;
	sscanf(want, "%u.%u", &want_major, &want_minor);
	return have_major > want_major || (have_major == want_major && have_minor >= want_minor);
}

struct condition {
	bool caps;        /* a non-empty capability list */
	bool arches;      /* a non-empty architecture list... */
	bool arch_match;  /* ...that names this machine's */
	const char *min_kernel;
};

static int parse_condition(struct compiler *c, const kiwi_json *cond, const char *where,
			   struct condition *out)
{
	static const char *const keys[] = { "caps", "arches", "minKernel", NULL };
	*out = (struct condition){ 0 };
	if (check_keys(c, cond, where, keys) < 0)
		return -1;
	const kiwi_json *v = kiwi_json_get(cond, "caps");
	if (v && get_array(c, v, where) < 0)
		return -1;
	out->caps = v && kiwi_json_len(v) > 0;
	v = kiwi_json_get(cond, "arches");
	if (v && get_array(c, v, where) < 0)
		return -1;
	out->arches = v && kiwi_json_len(v) > 0;
	for (size_t i = 0; v && i < kiwi_json_len(v); i++) {
		const char *name;
		if (get_string(c, kiwi_json_at(v, i), where, &name) < 0)
			return -1;
		out->arch_match |= !strcmp(name, GO_ARCH);
	}
	v = kiwi_json_get(cond, "minKernel");
	if (v && get_string(c, v, where, &out->min_kernel) < 0)
		return -1;
	if (out->min_kernel && !isdigit((unsigned char)out->min_kernel[0]))
		return bad(c, where, "minKernel `%s` is not a kernel version", out->min_kernel);
	return 0;
}

/* Docker's semantics, for a sandbox that holds no capabilities: a rule
 * applies when every "includes" field holds and no "excludes" field does. */
static int rule_applies(struct compiler *c, const kiwi_json *rule, const char *where, bool *applies)
{
	char w[96];
	struct condition cond;
	*applies = true;
	const kiwi_json *v = kiwi_json_get(rule, "includes");
	if (v) {
		path(w, sizeof(w), "%s.includes", where);
		if (parse_condition(c, v, w, &cond) < 0)
			return -1;
		if (cond.caps || (cond.arches && !cond.arch_match) ||
		    (cond.min_kernel && !kernel_at_least(cond.min_kernel)))
			*applies = false;
	}
	v = kiwi_json_get(rule, "excludes");
	if (v) {
		path(w, sizeof(w), "%s.excludes", where);
		if (parse_condition(c, v, w, &cond) < 0)
			return -1;
		if ((cond.arches && cond.arch_match) ||
		    (cond.min_kernel && kernel_at_least(cond.min_kernel)))
			*applies = false;
	}
	return 0;
}

/* ---- rules ---- */

static int parse_arg(struct compiler *c, const kiwi_json *a, const char *where,
		     struct scmp_arg_cmp *out)
{
	static const char *const keys[] = { "index", "value", "valueTwo", "op", NULL };
	char w[128];
	if (check_keys(c, a, where, keys) < 0)
		return -1;
	unsigned long long index = 0, value = 0, two = 0;
	path(w, sizeof(w), "%s.index", where);
	if (get_uint(c, kiwi_json_get(a, "index"), w, 5, &index) < 0)
		return -1;
	path(w, sizeof(w), "%s.value", where);
	if (get_uint(c, kiwi_json_get(a, "value"), w, INT64_MAX, &value) < 0)
		return -1;
	path(w, sizeof(w), "%s.valueTwo", where);
	const kiwi_json *v = kiwi_json_get(a, "valueTwo");
	if (v && get_uint(c, v, w, INT64_MAX, &two) < 0)
		return -1;
	path(w, sizeof(w), "%s.op", where);
	const char *op;
	if (get_string(c, kiwi_json_get(a, "op"), w, &op) < 0)
		return -1;
	size_t k = 0;
	while (k < KIWI_ARRAY_SIZE(ops) && strcmp(ops[k].name, op))
		k++;
	if (k == KIWI_ARRAY_SIZE(ops))
		return bad(c, w, "unknown operator `%s`", op);
	*out = (struct scmp_arg_cmp){ .arg = (unsigned)index, .op = ops[k].op,
				      .datum_a = value, .datum_b = two };
	return 0;
}

static int parse_args(struct compiler *c, const kiwi_json *v, const char *where,
		      struct scmp_arg_cmp *args, unsigned *n)
{
	char w[112];
	*n = 0;
	if (!v)
		return 0;
	path(w, sizeof(w), "%s.args", where);
	if (get_array(c, v, w) < 0)
		return -1;
	if (kiwi_json_len(v) > 6)
		return bad(c, w, "more than 6 comparisons");
	for (size_t i = 0; i < kiwi_json_len(v); i++) {
		path(w, sizeof(w), "%s.args[%zu]", where, i);
		if (parse_arg(c, kiwi_json_at(v, i), w, &args[i]) < 0)
			return -1;
		/* libseccomp ANDs a rule's comparisons but takes one per argument. */
		for (size_t k = 0; k < i; k++)
			if (args[k].arg == args[i].arg)
				return bad(c, w, "a second comparison on argument %u; write a separate rule",
					   args[i].arg);
	}
	*n = (unsigned)kiwi_json_len(v);
	return 0;
}

/* Every name the profile mentions moves the ENOSYS line, even in a rule
 * that does not apply here: the author knew that syscall. */
static void raise_enosys_line(struct compiler *c, const char *name)
{
	for (size_t i = 0; i < c->n_arches; i++) {
		int nr = seccomp_syscall_resolve_name_arch(c->arches[i], name);
		if (nr >= 0 && nr > c->max_nr[i])
			c->max_nr[i] = nr;
	}
}

/* Unknown names are skipped, as runc does: a profile may name syscalls
 * newer than this libseccomp, and those then fall above the ENOSYS line. */
static int add_name(struct compiler *c, const char *name, uint32_t action,
		    const struct scmp_arg_cmp *args, unsigned n_args, const char *where)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return 0;
	int rc = seccomp_rule_add_array(c->ctx, action, nr, n_args, args);
	if (rc < 0)
		return kiwi_error(c->err, -rc, "seccomp", "profile `%s`: %s: libseccomp refuses the rule for `%s`",
				  c->origin, where, name);
	return 0;
}

static int parse_rule(struct compiler *c, const kiwi_json *rule, const char *where)
{
	static const char *const keys[] = { "names", "name", "action", "errnoRet", "args",
					    "comment", "includes", "excludes", NULL };
	char w[96];
	if (check_keys(c, rule, where, keys) < 0)
		return -1;
	bool applies;
	if (rule_applies(c, rule, where, &applies) < 0)
		return -1;
	char ew[96];
	path(w, sizeof(w), "%s.action", where);
	path(ew, sizeof(ew), "%s.errnoRet", where);
	uint32_t action;
	if (parse_action(c, kiwi_json_get(rule, "action"), w, kiwi_json_get(rule, "errnoRet"), ew, &action) < 0)
		return -1;
	struct scmp_arg_cmp args[6];
	unsigned n_args;
	if (parse_args(c, kiwi_json_get(rule, "args"), where, args, &n_args) < 0)
		return -1;

	const kiwi_json *names = kiwi_json_get(rule, "names");
	const kiwi_json *name = kiwi_json_get(rule, "name");
	if (!names && !name)
		return bad(c, where, "has neither `names` nor `name`");
	path(w, sizeof(w), "%s.names", where);
	if (names && get_array(c, names, w) < 0)
		return -1;
	for (size_t i = 0; i < kiwi_json_len(names) + (name != NULL); i++) {
		const kiwi_json *n = i < kiwi_json_len(names) ? kiwi_json_at(names, i) : name;
		if (n == name)
			path(w, sizeof(w), "%s.name", where);
		else
			path(w, sizeof(w), "%s.names[%zu]", where, i);
		const char *s;
		if (get_string(c, n, w, &s) < 0)
			return -1;
		raise_enosys_line(c, s);
		if (applies && add_name(c, s, action, args, n_args, w) < 0)
			return -1;
	}
	return 0;
}

/* ---- BPF ---- */

static int export_bpf(struct compiler *c, struct sock_filter **out, size_t *n)
{
	/* libseccomp 2.5 exports only to an fd; a memfd keeps it off disk. */
	_cleanup_close_ int fd = memfd_create("kiwi-seccomp-bpf", MFD_CLOEXEC);
	if (fd < 0)
		return kiwi_error(c->err, errno, "seccomp", "memfd_create for the BPF export");
	int rc = seccomp_export_bpf(c->ctx, fd);
	if (rc < 0)
		return kiwi_error(c->err, -rc, "seccomp", "profile `%s`: libseccomp cannot generate the filter",
				  c->origin);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kiwi_error(c->err, errno, "seccomp", "fstat of the BPF export");
	if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter))
		return kiwi_error(c->err, EIO, "seccomp", "libseccomp exported %lld bytes of BPF",
				  (long long)st.st_size);
	_cleanup_free_ struct sock_filter *insns = malloc((size_t)st.st_size);
	if (!insns)
		return kiwi_error(c->err, ENOMEM, "seccomp", "cannot allocate %lld bytes", (long long)st.st_size);
	if (lseek(fd, 0, SEEK_SET) < 0 || !read_all(fd, insns, (size_t)st.st_size))
		return kiwi_error(c->err, errno, "seccomp", "reading back the BPF export");
	*n = (size_t)st.st_size / sizeof(struct sock_filter);
	*out = TAKE_PTR(insns);
	return 0;
}

/* if (arch == audit && lo <= nr < hi) return ret; else fall through. */
static size_t emit_range(struct sock_filter *p, uint32_t audit, uint32_t lo, uint32_t hi, uint32_t ret)
{
	const struct sock_filter block[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, audit, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, lo, 0, 2),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, hi, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, ret),
	};
	memcpy(p, block, sizeof(block));
	return KIWI_ARRAY_SIZE(block);
}

#define RANGE_INSNS 6
#define PREFIX_MAX (RANGE_INSNS * (MAX_ARCHES + 1))

static bool listed(const struct compiler *c, uint32_t arch)
{
	for (size_t i = 0; i < c->n_arches; i++)
		if (c->arches[i] == arch)
			return true;
	return false;
}

/* The checks libseccomp cannot express; see the comment at the top. */
static size_t build_prefix(const struct compiler *c, struct sock_filter *p)
{
	size_t n = 0;
	bool enosys = c->default_action != SCMP_ACT_ALLOW && c->default_action != SCMP_ACT_LOG;
	for (size_t i = 0; enosys && i < c->n_arches; i++) {
		if (c->max_nr[i] < 0)
			continue;
		if (c->arches[i] == SCMP_ARCH_X32)
			n += emit_range(p + n, AUDIT_ARCH_X86_64, (uint32_t)c->max_nr[i] + 1, UINT32_MAX,
					SCMP_ACT_ERRNO(ENOSYS));
		else
			n += emit_range(p + n, c->arches[i], (uint32_t)c->max_nr[i] + 1, X32_SYSCALL_BIT,
					SCMP_ACT_ERRNO(ENOSYS));
	}
	if (listed(c, SCMP_ARCH_X86_64) && !listed(c, SCMP_ARCH_X32))
		n += emit_range(p + n, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT, UINT32_MAX, SCMP_ACT_KILL_PROCESS);
	return n;
}

static int finish(struct compiler *c, struct kiwi_seccomp **out)
{
	_cleanup_free_ struct sock_filter *body = NULL;
	size_t n_body = 0;
	if (export_bpf(c, &body, &n_body) < 0)
		return -1;
	struct sock_filter prefix[PREFIX_MAX];
	size_t n_prefix = build_prefix(c, prefix);
	size_t total = n_prefix + n_body;
	if (total > BPF_MAXINSNS)
		return kiwi_error(c->err, E2BIG, "seccomp", "profile `%s`: the filter needs %zu instructions, "
				  "the kernel takes %d", c->origin, total, BPF_MAXINSNS);
	struct kiwi_seccomp *f = kiwi_seccomp_alloc(total, c->flags);
	if (!f)
		return kiwi_error(c->err, ENOMEM, "seccomp", "cannot allocate the filter");
	memcpy(f->insns, prefix, n_prefix * sizeof(*prefix));
	for (size_t i = 0; i < n_body; i++) {
		struct sock_filter *ins = &f->insns[n_prefix + i];
		*ins = body[i];
		if (ins->code == (BPF_RET | BPF_K) && ins->k == PLACEHOLDER_DEFAULT)
			ins->k = c->default_action;
	}
	*out = f;
	return 0;
}

/* ---- the profile ---- */

static int set_attrs(struct compiler *c)
{
	/* A binary tree over syscall numbers keeps the cost of a syscall flat
	 * as the allowlist grows, instead of a linear walk. */
	int rc = seccomp_attr_set(c->ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc == 0)
		rc = seccomp_attr_set(c->ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc < 0)
		return kiwi_error(c->err, -rc, "seccomp", "libseccomp refuses the filter attributes");
	return 0;
}

static int parse_top(struct compiler *c, const kiwi_json *j)
{
	static const char *const keys[] = { "defaultAction", "defaultErrnoRet", "architectures",
					    "archMap", "syscalls", "flags", "listenerPath",
					    "listenerMetadata", NULL };
	if (check_keys(c, j, "top level", keys) < 0)
		return -1;
	const kiwi_json *v = kiwi_json_get(j, "defaultAction");
	if (!v)
		return bad(c, "defaultAction", "missing; it is required");
	if (parse_action(c, v, "defaultAction", kiwi_json_get(j, "defaultErrnoRet"), "defaultErrnoRet",
			 &c->default_action) < 0)
		return -1;
	const char *listener = NULL;
	v = kiwi_json_get(j, "listenerPath");
	if (v && get_string(c, v, "listenerPath", &listener) < 0)
		return -1;
	if (listener && listener[0])
		return bad(c, "listenerPath", "seccomp notification agents are not supported");

	c->ctx = seccomp_init(PLACEHOLDER_DEFAULT);
	if (!c->ctx)
		return kiwi_error(c->err, ENOMEM, "seccomp", "libseccomp cannot create a filter");
	if (set_attrs(c) < 0 || add_arch(c, seccomp_arch_native(), "native architecture") < 0)
		return -1;
	v = kiwi_json_get(j, "architectures");
	if (each_item(c, v, "architectures", add_named_arch) < 0)
		return -1;
	const kiwi_json *map = kiwi_json_get(j, "archMap");
	if ((!v || !kiwi_json_len(v)) && each_item(c, map, "archMap", add_arch_map_entry) < 0)
		return -1;
	if (each_item(c, kiwi_json_get(j, "flags"), "flags", parse_flag) < 0)
		return -1;
	return each_item(c, kiwi_json_get(j, "syscalls"), "syscalls", parse_rule);
}

static int compile_tree(const kiwi_json *j, const char *origin, struct kiwi_seccomp **out, kiwi_err *err)
{
	_cleanup_(ctx_releasep) scmp_filter_ctx ctx = NULL;
	struct compiler c = { .origin = origin, .err = err };
	int rc = parse_top(&c, j);
	ctx = c.ctx;
	if (rc < 0)
		return -1;
	return finish(&c, out);
}

/* ---- the cache of compiled programs ----
 * Compiling the default profile costs 2-3 ms (libseccomp's rule database
 * and BPF generation), most of a sandbox start's budget of ~4 ms, so finished
 * programs are kept in a per-user directory. An entry holds the whole
 * profile text and the environment that shaped the program, and is used
 * only when both match byte for byte: the file name's hash just finds it,
 * so a collision costs a recompile, never a wrong filter. Entries are
 * trusted only in a directory and file owned by us and writable by no one
 * else, and only with a MAC under a key no sandbox can read (below): a
 * sandbox of the same user given the directory (--workspace ~) could
 * otherwise rewrite an entry to RET ALLOW for every later run. Any
 * failure here falls back to compiling. */

#define CACHE_MAGIC "kiwi-seccomp-v2\n"

struct cache_header {
	char magic[16];
	uint32_t env_len, text_len, flags, n_insns;
};

/* The MAC's key lives in the kernel: the caller's user keyring, readable
 * only by a possessor. Files are not enough: whatever directory held the
 * key, a bind could hand it to a sandbox. A sandbox never reaches this
 * key: its user namespace has a user keyring of its own, a key of the
 * caller's is read by serial only with a permission this one lacks, and
 * the filter refuses keyctl in any case. A key lost (logout, reboot) only
 * makes every entry compile again. */
#define CACHE_KEY_DESC "kiwi-run:seccomp-cache"
#define KEY_POS_ALL 0x3f000000
#define KEY_USR_VIEW 0x00010000

static bool cache_key(uint8_t key[16])
{
	long id = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", CACHE_KEY_DESC, 0);
	if (id >= 0)
		return syscall(SYS_keyctl, KEYCTL_READ, id, key, 16) == 16;
	if (getrandom(key, 16, 0) != 16)
		return false;
	id = syscall(SYS_add_key, "user", CACHE_KEY_DESC, key, 16, KEY_SPEC_USER_KEYRING);
	/* Two first runs at once: the later key wins, the earlier one's
	 * entries fail their MAC and are compiled again. */
	return id >= 0 && syscall(SYS_keyctl, KEYCTL_SETPERM, id, KEY_POS_ALL | KEY_USR_VIEW) == 0;
}

/* Off for this process: set when the run's binds reach the directory. */
static bool cache_off;

/* What, besides the text, decides the program: this build of the compiler,
 * the libseccomp it uses, the architecture, and the kernel (minKernel). */
static void cache_env(char *buf, size_t len)
{
	const struct scmp_version *v = seccomp_version();
	struct utsname u;
	if (uname(&u) < 0)
		u.release[0] = '\0';
#ifndef KIWI_VERSION
#define KIWI_VERSION "dev"
#endif
	path(buf, len, "kiwi-run %s built %s %s; libseccomp %u.%u.%u; arch %#x; kernel %s",
	     KIWI_VERSION, __DATE__, __TIME__, v->major, v->minor, v->micro, seccomp_arch_native(),
	     u.release);
}

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* secure_getenv: a setuid kiwi-run must not let its caller pick where it
 * reads filters from or creates files. */
static bool cache_dir(char *buf, size_t len)
{
	const char *env = secure_getenv("KIWI_SECCOMP_CACHE_DIR");
	const char *base;
	if (env)
		return *env && strcmp(env, "off") && (size_t)snprintf(buf, len, "%s", env) < len;
	if (geteuid() == 0)
		return (size_t)snprintf(buf, len, "/var/cache/kiwi-run/seccomp") < len;
	if ((base = secure_getenv("XDG_CACHE_HOME")) && base[0] == '/')
		return (size_t)snprintf(buf, len, "%s/kiwi-run/seccomp", base) < len;
	if ((base = secure_getenv("HOME")) && base[0] == '/')
		return (size_t)snprintf(buf, len, "%s/.cache/kiwi-run/seccomp", base) < len;
	return false;
}

static bool ours(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 022);
}

/* Opens the cache directory (creating it, mode 0700, when create is set). */
static int cache_open_dir(bool create)
{
	char dir[PATH_MAX];
	if (!cache_dir(dir, sizeof(dir)))
		return -1;
	for (char *slash = dir + 1; create && (slash = strchr(slash, '/')); slash++) {
		*slash = '\0';
		(void)mkdir(dir, 0700);
		*slash = '/';
	}
	if (create)
		(void)mkdir(dir, 0700);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !ours(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* path, resolved where it exists, else as given. */
static void resolved(const char *path, char *out, size_t len)
{
	char *r = realpath(path, NULL);
	snprintf(out, len, "%s", r ? r : path);
	free(r);
}

bool kiwi_seccomp_cache_skip_if_reached(const char *path)
{
	char dir[PATH_MAX], cd[PATH_MAX], p[PATH_MAX];
	if (cache_off || !cache_dir(dir, sizeof(dir)))
		return cache_off;
	resolved(dir, cd, sizeof(cd));
	resolved(path, p, sizeof(p));
	size_t cl = strlen(cd), pl = strlen(p);
	bool above = !strcmp(p, "/") || (pl <= cl && !strncmp(cd, p, pl) && (cd[pl] == '/' || cd[pl] == '\0'));
	bool below = pl > cl && !strncmp(p, cd, cl) && p[cl] == '/';
	cache_off = above || below;
	return cache_off;
}

static void cache_name(const char *env, const char *text, size_t len, char *name, size_t n)
{
	uint64_t h = fnv1a(0xcbf29ce484222325ull, env, strlen(env));
	path(name, n, "%016llx.bpf", (unsigned long long)fnv1a(h, text, len));
}

/* An entry is its header, the environment, the profile text, the
 * program, then the MAC of all that. */
static size_t entry_len(const struct cache_header *h)
{
	return sizeof(*h) + h->env_len + h->text_len + h->n_insns * sizeof(struct sock_filter) + sizeof(uint64_t);
}

static struct kiwi_seccomp *cache_lookup(const char *text, size_t len)
{
	char env[512], name[32];
	uint8_t key[16];
	if (cache_off || !cache_key(key))
		return NULL;
	cache_env(env, sizeof(env));
	cache_name(env, text, len, name, sizeof(name));
	_cleanup_close_ int dir = cache_open_dir(false);
	if (dir < 0)
		return NULL;
	_cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct cache_header h;
	if (fd < 0 || !ours(fd) || !read_all(fd, &h, sizeof(h)) || memcmp(h.magic, CACHE_MAGIC, 16) ||
	    h.env_len != strlen(env) || h.text_len != len || !h.n_insns || h.n_insns > BPF_MAXINSNS)
		return NULL;
	size_t total = entry_len(&h), body = total - sizeof(uint64_t);
	_cleanup_free_ char *entry = malloc(total);
	_cleanup_free_ struct kiwi_seccomp *f = kiwi_seccomp_alloc(h.n_insns, h.flags);
	uint64_t tag;
	if (!entry || !f || !read_all(fd, entry + sizeof(h), total - sizeof(h)))
		return NULL;
	memcpy(entry, &h, sizeof(h));
	memcpy(&tag, entry + body, sizeof(tag));
	const char *stored = entry + sizeof(h);
	if (tag != kiwi_siphash24(key, entry, body) || memcmp(stored, env, h.env_len) ||
	    memcmp(stored + h.env_len, text, len))
		return NULL;
	memcpy(f->insns, stored + h.env_len + len, h.n_insns * sizeof(struct sock_filter));
	if (BPF_CLASS(f->insns[h.n_insns - 1].code) != BPF_RET)
		return NULL;
	return TAKE_PTR(f);
}

#define CACHE_MAX_ENTRIES 64

/* Every rebuild of kiwi-run and every libseccomp or kernel update starts
 * new entries, so the oldest is dropped once there are too many. */
static void cache_prune(int dir)
{
	int fd = dup(dir);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	char oldest[NAME_MAX + 1] = "";
	struct timespec oldest_time = { 0 };
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		struct stat st;
		size_t len = strlen(e->d_name);
		if (len < 4 || strcmp(e->d_name + len - 4, ".bpf") ||
		    fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		n++;
		if (!oldest[0] || st.st_mtim.tv_sec < oldest_time.tv_sec ||
		    (st.st_mtim.tv_sec == oldest_time.tv_sec && st.st_mtim.tv_nsec < oldest_time.tv_nsec)) {
			oldest_time = st.st_mtim;
			snprintf(oldest, sizeof(oldest), "%s", e->d_name);
		}
	}
	closedir(d);
	if (n >= CACHE_MAX_ENTRIES)
		(void)unlinkat(dir, oldest, 0);
}

/* Written to a temporary name and renamed, so readers never see half. */
static void cache_store(const char *text, size_t len, const struct kiwi_seccomp *f)
{
	char env[512], name[32], tmp[48];
	uint8_t key[16];
	if (cache_off || !cache_key(key))
		return;
	cache_env(env, sizeof(env));
	cache_name(env, text, len, name, sizeof(name));
	_cleanup_close_ int dir = cache_open_dir(true);
	if (dir < 0)
		return;
	cache_prune(dir);
	/* Unique among live processes; O_EXCL steps past a crashed one's. */
	_cleanup_close_ int fd = -1;
	for (int tries = 0; fd < 0 && tries < 8; tries++) {
		path(tmp, sizeof(tmp), ".tmp-%d-%d", (int)getpid(), tries);
		fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return;
	struct cache_header h = { .env_len = (uint32_t)strlen(env), .text_len = (uint32_t)len,
				  .flags = f->flags, .n_insns = f->prog.len };
	memcpy(h.magic, CACHE_MAGIC, 16);
	size_t total = entry_len(&h), body = total - sizeof(uint64_t);
	_cleanup_free_ char *entry = malloc(total);
	if (!entry) {
		(void)unlinkat(dir, tmp, 0);
		return;
	}
	char *at = entry;
	at = mempcpy(at, &h, sizeof(h));
	at = mempcpy(at, env, h.env_len);
	at = mempcpy(at, text, len);
	at = mempcpy(at, f->insns, f->prog.len * sizeof(struct sock_filter));
	uint64_t tag = kiwi_siphash24(key, entry, body);
	memcpy(at, &tag, sizeof(tag));
	if (write(fd, entry, total) != (ssize_t)total || renameat(dir, tmp, dir, name) < 0)
		(void)unlinkat(dir, tmp, 0);
}

int kiwi_seccomp_compile_json(const char *text, size_t len, const char *origin,
			      struct kiwi_seccomp **out, kiwi_err *err)
{
	*out = cache_lookup(text, len);
	if (*out)
		return 0;
	_cleanup_json_ kiwi_json *j = kiwi_json_parse(text, len, err);
	if (!j)
		return kiwi_error_wrap(err, "seccomp profile `%s`", origin);
	if (compile_tree(j, origin, out, err) < 0)
		return -1;
	cache_store(text, len, *out);
	return 0;
}

/* Any readable file, so `--seccomp <(generate-profile)` works too. The
 * buffer is only touched as far as the profile goes. */
int kiwi_seccomp_compile_file(const char *path, struct kiwi_seccomp **out, kiwi_err *err)
{
	*out = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return kiwi_error(err, errno, "seccomp", "cannot open profile `%s`", path);
	char what[PATH_MAX + 32];
	snprintf(what, sizeof(what), "seccomp profile `%s`", path);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (kiwi_read_bounded(fd, KIWI_SECCOMP_PROFILE_MAX, what, &text, &len, err) < 0)
		return -1;
	return kiwi_seccomp_compile_json(text, len, path, out, err);
}

int kiwi_seccomp_load(const struct kiwi_seccomp *f, kiwi_err *err)
{
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, f->flags, &f->prog) == 0)
		return 0;
	if (errno == EACCES)
		return kiwi_error(err, errno, "seccomp", "cannot load the filter without no_new_privs or CAP_SYS_ADMIN");
	return kiwi_error(err, errno, "seccomp", "cannot load the filter (%u instructions)", f->prog.len);
}

void kiwi_seccomp_free(struct kiwi_seccomp *f)
{
	free(f);
}

const struct sock_fprog *kiwi_seccomp_program(const struct kiwi_seccomp *f)
{
	return &f->prog;
}

bool kiwi_seccomp_builtin(const struct kiwi_seccomp *f)
{
	return f->builtin;
}

unsigned int kiwi_seccomp_flags(const struct kiwi_seccomp *f)
{
	return f->flags;
}
