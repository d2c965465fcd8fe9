/* SPDX-License-Identifier: Apache-2.0 */
/* The effective policy written back as a policy file (`kiwi-run policy
 * check`): defaults spelt out, sizes in bytes, the built-in model keys
 * listed, so that what kiwi-run will do can be read in one place. The
 * output parses back to the same policy. */
#include "policy_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kiwi/cleanup.h"

static void write_size(kiwi_json_writer *w, const char *key, int64_t v)
{
	kiwi_jw_key(w, key);
	if (v == INT64_MAX)
		kiwi_jw_string(w, "max");
	else
		kiwi_jw_int(w, v);
}

/* "1.5" from 150000/100000: five decimals are whole microseconds. */
static void write_cpus(kiwi_json_writer *w, const struct kiwi_cgroup_limits *l)
{
	char text[48] = "max";
	if (l->cpu_quota_us != KIWI_CGROUP_MAX) {
		int64_t q = l->cpu_quota_us;
		int n = snprintf(text, sizeof(text), "%" PRId64 ".%05" PRId64, q / 100000, q % 100000);
		while (n > 0 && text[n - 1] == '0')
			text[--n] = '\0';
		if (n > 0 && text[n - 1] == '.')
			text[--n] = '\0';
	}
	kiwi_jw_key(w, "cpus");
	kiwi_jw_string(w, text);
}

/* The largest unit that holds the value exactly, as kiwi_parse_duration reads it. */
static void write_duration(kiwi_json_writer *w, const char *key, uint64_t ns)
{
	static const struct { const char *unit; uint64_t ns; } units[] = {
		{ "h", 3600000000000ULL }, { "m", 60000000000ULL }, { "s", 1000000000ULL },
		{ "ms", 1000000ULL },      { "us", 1000ULL },
	};
	char text[48];
	snprintf(text, sizeof(text), "%" PRIu64 ".%09" PRIu64 "s", ns / UINT64_C(1000000000), ns % UINT64_C(1000000000));
	for (size_t i = 0; i < KIWI_ARRAY_SIZE(units); i++)
		if (ns % units[i].ns == 0) {
			snprintf(text, sizeof(text), "%" PRIu64 "%s", ns / units[i].ns, units[i].unit);
			break;
		}
	kiwi_jw_key(w, key);
	kiwi_jw_string(w, text);
}

static void write_limits(kiwi_json_writer *w, const struct kiwi_phase_policy *ph)
{
	const struct kiwi_cgroup_limits *l = &ph->limits;
	kiwi_jw_key(w, "limits");
	kiwi_jw_open_object(w);
	if (l->memory_max >= 0)
		write_size(w, "memory", l->memory_max);
	if (l->memory_swap_max >= 0)
		write_size(w, "memory_swap", l->memory_swap_max);
	if (l->pids_max >= 0) {
		kiwi_jw_key(w, "pids");
		if (l->pids_max == KIWI_CGROUP_MAX)
			kiwi_jw_string(w, "max");
		else
			kiwi_jw_int(w, l->pids_max);
	}
	if (l->cpu_quota_us >= 0)
		write_cpus(w, l);
	if (l->io_weight > 0) {
		kiwi_jw_key(w, "io_weight");
		kiwi_jw_int(w, l->io_weight);
	}
	if (l->io_max) {
		kiwi_jw_key(w, "io_max");
		kiwi_jw_string(w, l->io_max);
	}
	if (ph->timeout_set)
		write_duration(w, "timeout", ph->timeout_ns);
	if (ph->output_limit_set)
		write_size(w, "output_limit", (int64_t)ph->output_limit);
	if (ph->disk_bytes)
		write_size(w, "disk", (int64_t)ph->disk_bytes);
	kiwi_jw_close_object(w);
}

/* The values given for one egress key, as an array. */
static void write_egress_list(kiwi_json_writer *w, const struct kiwi_phase_policy *ph, const char *key,
			      const char *json_key)
{
	kiwi_jw_key(w, json_key);
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < ph->n_egress; i++)
		if (!strcmp(ph->egress_keys[i], key))
			kiwi_jw_string(w, ph->egress_values[i]);
	kiwi_jw_close_array(w);
}

/* The last value given for a single-valued key, or NULL. */
static const char *egress_last(const struct kiwi_phase_policy *ph, const char *key)
{
	const char *v = NULL;
	for (size_t i = 0; i < ph->n_egress; i++)
		if (!strcmp(ph->egress_keys[i], key))
			v = ph->egress_values[i];
	return v;
}

static void write_egress(kiwi_json_writer *w, const struct kiwi_phase_policy *ph)
{
	const char *mode = egress_last(ph, "egress");
	const char *dns = egress_last(ph, "dns");
	kiwi_jw_key(w, "egress");
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "mode");
	kiwi_jw_string(w, mode ? mode : "public_internet");
	write_egress_list(w, ph, "allow-cidr", "allow_cidr");
	write_egress_list(w, ph, "allow-host", "allow_host");
	write_egress_list(w, ph, "allow-port", "allow_port");
	if (dns) {
		kiwi_jw_key(w, "dns");
		kiwi_jw_string(w, dns);
	}
	kiwi_jw_close_object(w);
}

static void write_phase(kiwi_json_writer *w, const struct kiwi_phase_policy *ph, enum kiwi_phase phase)
{
	kiwi_jw_key(w, kiwi_phase_name(phase));
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "network");
	kiwi_jw_string(w, ph->network_egress ? "egress" : "none");
	if (ph->network_egress)
		write_egress(w, ph);
	write_limits(w, ph);
	kiwi_jw_key(w, "env");
	kiwi_jw_open_object(w);
	for (size_t i = 0; i < ph->n_set_env; i++) {
		const char *kv = ph->set_env[i];
		size_t klen = strcspn(kv, "=");
		_cleanup_free_ char *name = strndup(kv, klen);
		kiwi_jw_key(w, name ? name : "");   /* out of memory: the writer's output is cut short anyway */
		kiwi_jw_string(w, kv[klen] ? kv + klen + 1 : "");
	}
	kiwi_jw_close_object(w);
	if (phase == KIWI_PHASE_VERIFY) {
		kiwi_jw_key(w, "pass_env");
		kiwi_jw_open_array(w);
		for (size_t i = 0; i < ph->n_pass_env; i++)
			kiwi_jw_string(w, ph->pass_env[i]);
		kiwi_jw_close_array(w);
	}
	kiwi_jw_key(w, "caches");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < ph->n_caches; i++) {
		kiwi_jw_open_object(w);
		kiwi_jw_key(w, "host");
		kiwi_jw_string(w, ph->caches[i].host);
		kiwi_jw_key(w, "dest");
		kiwi_jw_string(w, ph->caches[i].dest);
		kiwi_jw_close_object(w);
	}
	kiwi_jw_close_array(w);
	kiwi_jw_close_object(w);
}

void kiwi_policy_write_json(const struct kiwi_policy *p, kiwi_json_writer *w)
{
	kiwi_jw_open_object(w);
	kiwi_jw_key(w, "version");
	kiwi_jw_int(w, KIWI_POLICY_VERSION);
	write_phase(w, &p->install, KIWI_PHASE_INSTALL);
	write_phase(w, &p->verify, KIWI_PHASE_VERIFY);
	kiwi_jw_key(w, "deny_env");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < p->n_deny_env; i++)
		kiwi_jw_string(w, p->deny_env[i]);
	kiwi_jw_close_array(w);
	size_t n_builtin;
	const char *const *builtin = kiwi_policy_builtin_model_keys(&n_builtin);
	kiwi_jw_key(w, "model_keys");
	kiwi_jw_open_array(w);
	for (size_t i = 0; i < n_builtin; i++)
		kiwi_jw_string(w, builtin[i]);
	for (size_t i = 0; i < p->n_model_keys; i++)
		kiwi_jw_string(w, p->model_keys[i]);
	kiwi_jw_close_array(w);
	kiwi_jw_key(w, "allow_test_credentials");
	kiwi_jw_bool(w, p->allow_test_credentials);
	kiwi_jw_close_object(w);
}
