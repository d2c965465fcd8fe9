/* SPDX-License-Identifier: Apache-2.0 */
/* The documents kiwi-run writes without a container: the default
 * config.json of `spec` and the `features` object. Their shapes are the
 * ones runc prints, since tools (podman, the containerd shim) read them. */
#include "kiwi/oci_runtime.h"
#include "kiwi/oci_config.h"

#include <seccomp.h>
#include <stdio.h>

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static void strings(kiwi_json_writer *w, const char *key, const char *const *list)
{
	kiwi_jw_key(w, key);
	kiwi_jw_open_array(w);
	for (; *list; list++)
		kiwi_jw_string(w, *list);
	kiwi_jw_close_array(w);
}

static void mount(kiwi_json_writer *w, const char *dest, const char *type, const char *src,
		  const char *const *opts)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "destination");
	kiwi_jw_string(w, dest);
	kiwi_jw_key(w, "type");
	kiwi_jw_string(w, type);
	kiwi_jw_key(w, "source");
	kiwi_jw_string(w, src);
	if (opts)
		strings(w, "options", opts);
	kiwi_jw_close_object(w);
}

static void spec_process(kiwi_json_writer *w)
{
	static const char *const args[] = { "sh", NULL };
	static const char *const env[] = { DEFAULT_PATH, "TERM=xterm", NULL };
	static const char *const caps[] = { "CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE", NULL };
	static const char *const sets[] = { "bounding", "effective", "permitted", "ambient" };
	kiwi_jw_key(w, "process");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "terminal");
	kiwi_jw_bool(w, true);
	kiwi_jw_key(w, "user");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "uid");
	kiwi_jw_int(w, 0);
	kiwi_jw_key(w, "gid");
	kiwi_jw_int(w, 0);
	kiwi_jw_close_object(w);
	strings(w, "args", args);
	strings(w, "env", env);
	kiwi_jw_key(w, "cwd");
	kiwi_jw_string(w, "/");
	kiwi_jw_key(w, "capabilities");
	kiwi_jw_open_object(w);
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		strings(w, sets[i], caps);
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "rlimits");
	kiwi_jw_open_array(w);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "type");
	kiwi_jw_string(w, "RLIMIT_NOFILE");
	kiwi_jw_key(w, "hard");
	kiwi_jw_int(w, 1024);
	kiwi_jw_key(w, "soft");
	kiwi_jw_int(w, 1024);
	kiwi_jw_close_object(w);
	kiwi_jw_close_array(w);
	kiwi_jw_key(w, "noNewPrivileges");
	kiwi_jw_bool(w, true);
	kiwi_jw_close_object(w);
}

static void spec_mounts(kiwi_json_writer *w, bool rootless)
{
	static const char *const dev[] = { "nosuid", "strictatime", "mode=755", "size=65536k", NULL };
	static const char *const pts[] = { "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
					   "gid=5", NULL };
	/* gid 5 (tty) is rarely mapped in a rootless container. */
	static const char *const pts_rootless[] = { "nosuid", "noexec", "newinstance", "ptmxmode=0666",
						    "mode=0620", NULL };
	static const char *const shm[] = { "nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL };
	static const char *const nodev[] = { "nosuid", "noexec", "nodev", NULL };
	static const char *const sys[] = { "nosuid", "noexec", "nodev", "ro", NULL };
	static const char *const cg[] = { "nosuid", "noexec", "nodev", "relatime", "ro", NULL };
	kiwi_jw_key(w, "mounts");
	kiwi_jw_open_array(w);
	mount(w, "/proc", "proc", "proc", NULL);
	mount(w, "/dev", "tmpfs", "tmpfs", dev);
	mount(w, "/dev/pts", "devpts", "devpts", rootless ? pts_rootless : pts);
	mount(w, "/dev/shm", "tmpfs", "shm", shm);
	mount(w, "/dev/mqueue", "mqueue", "mqueue", nodev);
	mount(w, "/sys", "sysfs", "sysfs", sys);
	mount(w, "/sys/fs/cgroup", "cgroup", "cgroup", cg);
	kiwi_jw_close_array(w);
}

static void idmap(kiwi_json_writer *w, const char *key, unsigned host)
{
	kiwi_jw_key(w, key);
	kiwi_jw_open_array(w);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "containerID");
	kiwi_jw_int(w, 0);
	kiwi_jw_key(w, "hostID");
	kiwi_jw_int(w, host);
	kiwi_jw_key(w, "size");
	kiwi_jw_int(w, 1);
	kiwi_jw_close_object(w);
	kiwi_jw_close_array(w);
}

static void spec_linux(kiwi_json_writer *w, bool rootless, unsigned uid, unsigned gid)
{
	static const char *const masked[] = {
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi", NULL,
	};
	static const char *const readonly[] = { "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
						"/proc/sysrq-trigger", NULL };
	/* Unlike runc's rootless default, the network namespace stays: a
	 * sandbox gets no network unless it is given one. */
	static const char *const ns[] = { "pid", "network", "ipc", "uts", "mount", "cgroup", NULL };
	kiwi_jw_key(w, "linux");
	kiwi_jw_open_object(w);
	if (rootless) {
		idmap(w, "uidMappings", uid);
		idmap(w, "gidMappings", gid);
	} else {
		kiwi_jw_key(w, "resources");
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "devices");
		kiwi_jw_open_array(w);
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "allow");
		kiwi_jw_bool(w, false);
		kiwi_jw_key(w, "access");
		kiwi_jw_string(w, "rwm");
		kiwi_jw_close_object(w);
		kiwi_jw_close_array(w);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_key(w, "namespaces");
	kiwi_jw_open_array(w);
	for (const char *const *n = ns; *n; n++) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "type");
		kiwi_jw_string(w, *n);
		kiwi_jw_close_object(w);
	}
	if (rootless) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "type");
		kiwi_jw_string(w, "user");
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	strings(w, "maskedPaths", masked);
	strings(w, "readonlyPaths", readonly);
	kiwi_jw_close_object(w);
}

void kiwi_oci_write_spec(kiwi_json_writer *w, bool rootless, unsigned uid, unsigned gid)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "ociVersion");
	kiwi_jw_string(w, KIWI_OCI_VERSION);
	spec_process(w);
	kiwi_jw_key(w, "root");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "path");
	kiwi_jw_string(w, "rootfs");
	kiwi_jw_key(w, "readonly");
	kiwi_jw_bool(w, true);
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "hostname");
	kiwi_jw_string(w, "kiwi");
	spec_mounts(w, rootless);
	spec_linux(w, rootless, uid, gid);
	kiwi_jw_close_object(w);
}

static void features_linux(kiwi_json_writer *w)
{
	static const char *const ns[] = { "cgroup", "ipc", "mount", "network", "pid", "user", "uts", NULL };
	static const char *const actions[] = { "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
					       "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
					       "SCMP_ACT_TRACE", "SCMP_ACT_TRAP", NULL };
	static const char *const ops[] = { "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE",
					   "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE", NULL };
	static const char *const archs[] = { "SCMP_ARCH_X86", "SCMP_ARCH_X86_64", "SCMP_ARCH_X32",
					     "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM", NULL };
	kiwi_jw_key(w, "linux");
	kiwi_jw_open_object(w);
	strings(w, "namespaces", ns);
	kiwi_jw_key(w, "capabilities");
	kiwi_jw_open_array(w);
	for (int i = 0; i < kiwi_oci_cap_count(); i++) {
		char name[64];
		snprintf(name, sizeof(name), "CAP_%s", kiwi_oci_cap_name(i));
		kiwi_jw_string(w, name);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_key(w, "cgroup");
	kiwi_jw_open_object(w);
	static const char *const cg[][2] = { { "v1", "" }, { "v2", "y" }, { "systemd", "" }, { "systemdUser", "" } };
	for (size_t i = 0; i < 4; i++) {
		kiwi_jw_key(w, cg[i][0]);
		kiwi_jw_bool(w, cg[i][1][0]);
	}
	kiwi_jw_close_object(w);
	kiwi_jw_key(w, "seccomp");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "enabled");
	kiwi_jw_bool(w, true);
	strings(w, "actions", actions);
	strings(w, "operators", ops);
	strings(w, "archs", archs);
	kiwi_jw_close_object(w);
	static const char *const lsms[] = { "apparmor", "selinux" };
	for (size_t i = 0; i < 2; i++) {
		kiwi_jw_key(w, lsms[i]);
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "enabled");
		kiwi_jw_bool(w, false);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_object(w);
}

void kiwi_oci_write_features(kiwi_json_writer *w)
{
	static const char *const hooks[] = { "prestart", "createRuntime", "createContainer", "startContainer",
					     "poststart", "poststop", NULL };
	static const char *const opts[] = {
		"async", "atime", "bind", "defaults", "dev", "diratime", "dirsync", "exec", "idmap", "noatime", "nodev",
		"nodiratime", "noexec", "nomand", "norelatime", "nostrictatime", "nosuid", "private", "rbind",
		"relatime", "ridmap", "ro", "rprivate", "rshared", "rslave", "runbindable", "rw", "shared", "slave",
		"strictatime", "suid", "sync", "unbindable", NULL,
	};
	const struct scmp_version *v = seccomp_version();
	char libseccomp[32];
	snprintf(libseccomp, sizeof(libseccomp), "%u.%u.%u", v->major, v->minor, v->micro);
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "ociVersionMin");
	kiwi_jw_string(w, "1.0.0");
	kiwi_jw_key(w, "ociVersionMax");
	kiwi_jw_string(w, KIWI_OCI_VERSION);
	strings(w, "hooks", hooks);
	strings(w, "mountOptions", opts);
	features_linux(w);
	kiwi_jw_key(w, "annotations");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "io.github.seccomp.libseccomp.version");
	kiwi_jw_string(w, libseccomp);
	kiwi_jw_key(w, "io.kiwi.version");
	kiwi_jw_string(w, KIWI_VERSION);
	kiwi_jw_close_object(w);
	kiwi_jw_close_object(w);
}
