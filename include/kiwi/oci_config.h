/* SPDX-License-Identifier: Apache-2.0 */
/* An OCI runtime-spec bundle's config.json, parsed and checked once, before
 * anything is created. Every string points into the parsed JSON tree the
 * config keeps, so the config is one object to free.
 * What is supported, ignored and refused is listed in kiwi-run-oci(1),
 * CONFIG.JSON. Unknown keys are ignored, as the runtime-spec asks; known
 * keys kiwi-run cannot apply are refused, never half-applied. */
#ifndef KIWI_OCI_CONFIG_H
#define KIWI_OCI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiwi/cgroup.h"
#include "kiwi/err.h"
#include "kiwi/json.h"

/* config.json is small; anything this big is a mistake or an attack. */
#define KIWI_OCI_CONFIG_MAX (4u << 20)

struct kiwi_oci_idmap {
	uint32_t container_id, host_id, size;
};

/* One entry of `mounts`, with its options already sorted out. */
struct kiwi_oci_mount {
	const char *destination;   /* absolute, inside the container */
	const char *type;          /* "bind" for binds, else a filesystem type */
	const char *source;
	bool bind, recursive;      /* bind/rbind option, or type "bind" */
	uint64_t attr_set, attr_clr;   /* MOUNT_ATTR_* from ro, nosuid, ... */
	uint64_t propagation;      /* MS_PRIVATE/MS_SHARED/... or 0 */
	bool propagation_recursive;
	/* sync, dirsync: flags of a new filesystem's superblock; a bind shares
	 * its source's superblock, which the kernel never changes through it. */
	bool sync, dirsync;
	/* idmap/ridmap (or mappings given): an idmapped bind, with the mount's
	 * uidMappings/gidMappings, else the container's user namespace maps. */
	bool idmap, idmap_recursive;
	struct kiwi_oci_idmap *uid_maps, *gid_maps;
	size_t n_uid_maps, n_gid_maps;
	/* Filesystem options ("mode=755", "newinstance"), NULL-terminated;
	 * passed to fsconfig() key by key. */
	char **data;
};


struct kiwi_oci_rlimit {
	int resource;              /* RLIMIT_* */
	uint64_t soft, hard;
};

struct kiwi_oci_device {
	const char *path;
	char type;                 /* 'c', 'b', 'u' or 'p' */
	int64_t major, minor;
	uint32_t mode;             /* fileMode, default 0666 */
	uint32_t uid, gid;
};

/* One rule of linux.resources.devices. */
struct kiwi_oci_device_rule {
	bool allow;
	char type;                 /* 'a', 'c' or 'b' */
	int64_t major, minor;      /* -1: any */
	unsigned access;           /* KIWI_OCI_DEV_* */
};
enum { KIWI_OCI_DEV_READ = 1, KIWI_OCI_DEV_WRITE = 2, KIWI_OCI_DEV_MKNOD = 4 };

struct kiwi_oci_hook {
	const char *path;
	char **argv;               /* NULL-terminated; default { path } */
	char **env;                /* NULL-terminated, maybe empty; NULL: the runtime's own */
	int timeout_s;             /* 0: none */
};

enum kiwi_oci_hook_kind {
	KIWI_OCI_HOOK_PRESTART,
	KIWI_OCI_HOOK_CREATE_RUNTIME,
	KIWI_OCI_HOOK_CREATE_CONTAINER,
	KIWI_OCI_HOOK_START_CONTAINER,
	KIWI_OCI_HOOK_POSTSTART,
	KIWI_OCI_HOOK_POSTSTOP,
	KIWI_OCI_HOOK_KINDS,
};

/* Capability sets as bit masks (bit N = capability N). */
enum kiwi_oci_cap_set {
	KIWI_OCI_CAP_BOUNDING,
	KIWI_OCI_CAP_EFFECTIVE,
	KIWI_OCI_CAP_INHERITABLE,
	KIWI_OCI_CAP_PERMITTED,
	KIWI_OCI_CAP_AMBIENT,
	KIWI_OCI_CAP_SETS,
};

struct kiwi_oci_process {
	bool terminal;
	unsigned console_height, console_width;   /* 0: not set */
	uint32_t uid, gid;
	uint32_t *additional_gids;
	size_t n_additional_gids;
	char **args;               /* NULL-terminated, at least one */
	char **env;                /* NULL-terminated */
	const char *cwd;           /* absolute */
	uint64_t caps[KIWI_OCI_CAP_SETS];
	struct kiwi_oci_rlimit *rlimits;
	size_t n_rlimits;
	bool no_new_privileges;
	bool has_oom_score_adj;
	int oom_score_adj;
	const char *umask_text;    /* NULL: not set */
	uint32_t umask;
};

struct kiwi_oci_namespace {
	int type;                  /* CLONE_NEW* */
	const char *path;          /* NULL: a new one */
};

struct kiwi_oci_config {
	kiwi_json *doc;            /* owns every string below */
	const char *oci_version;
	const char *root_path;     /* as written: relative to the bundle or absolute */
	bool root_readonly;
	const char *hostname;      /* NULL: unchanged */
	const char *domainname;
	struct kiwi_oci_process process;
	bool has_process;          /* `process` may be absent for create; start then fails */

	struct kiwi_oci_mount *mounts;
	size_t n_mounts;

	struct kiwi_oci_namespace *namespaces;
	size_t n_namespaces;
	uint64_t new_ns;           /* CLONE_NEW* of namespaces without a path */
	uint64_t join_ns;          /* CLONE_NEW* of namespaces with a path */
	struct kiwi_oci_idmap *uid_maps, *gid_maps;
	size_t n_uid_maps, n_gid_maps;

	const char *cgroups_path;  /* NULL: none given */
	struct kiwi_cgroup_limits limits;
	bool has_limits;           /* a limit kiwi-run writes was given */
	int64_t cpu_shares;        /* as given (0: none), for messages; limits has cpu.weight */

	char *seccomp_json;        /* linux.seccomp re-serialised for the seccomp module; NULL: none */
	const char **masked_paths, **readonly_paths;
	size_t n_masked_paths, n_readonly_paths;
	struct kiwi_oci_device *devices;
	size_t n_devices;
	struct kiwi_oci_device_rule *device_rules;
	size_t n_device_rules;
	const char **sysctl;       /* key, value, key, value..., NULL */
	size_t n_sysctl;
	const char **unified;      /* linux.resources.unified: file, value..., NULL; limits.unified */
	uint64_t rootfs_propagation;   /* MS_* or 0 (then private) */

	struct kiwi_oci_hook *hooks[KIWI_OCI_HOOK_KINDS];
	size_t n_hooks[KIWI_OCI_HOOK_KINDS];

	const kiwi_json *annotations;  /* object or NULL */
	/* Fields accepted but not applied, for the --debug log: "apparmorProfile". */
	const char *ignored[8];
	size_t n_ignored;
	/* Capability names neither kiwi-run nor (so) the kernel knows: skipped,
	 * with a warning on the log, as runc does. */
	const char *unknown_caps[8];
	size_t n_unknown_caps;
};

/* Parses and checks config text. On failure err says which field and why
 * (step "config"), and *out is untouched. */
int kiwi_oci_config_parse(const char *text, size_t len, struct kiwi_oci_config **out, kiwi_err *err);
/* Reads <bundle>/config.json. */
int kiwi_oci_config_load(const char *bundle, struct kiwi_oci_config **out, kiwi_err *err);
void kiwi_oci_config_free(struct kiwi_oci_config *c);

/* A capability's number from "CAP_SYS_ADMIN" (or "sys_admin"), -1 if unknown. */
int kiwi_oci_cap_from_name(const char *name);
const char *kiwi_oci_cap_name(int cap);
/* "RLIMIT_NOFILE" for RLIMIT_NOFILE, or NULL. */
const char *kiwi_oci_rlimit_name(int resource);
/* Number of capabilities kiwi-run knows by name. */
int kiwi_oci_cap_count(void);
/* The access linux.resources.devices leaves to a device node (KIWI_OCI_DEV_*),
 * as runc reads the rules: in order, the last match wins, everything
 * allowed before the first; the default nodes and linux.devices are
 * allowed after them, as runc appends their rules. */
unsigned kiwi_oci_device_access(const struct kiwi_oci_config *c, char type, int64_t major, int64_t minor);
/* An annotation's value, or NULL. */
const char *kiwi_oci_annotation(const struct kiwi_oci_config *c, const char *key);
const char *kiwi_oci_hook_kind_name(enum kiwi_oci_hook_kind k);

static inline void kiwi_oci_config_freep(struct kiwi_oci_config **c)
{
	kiwi_oci_config_free(*c);
}
#define _cleanup_oci_config_ __attribute__((cleanup(kiwi_oci_config_freep)))

#endif
