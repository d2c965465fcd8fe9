/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/json.h"
#include "kiwi/cleanup.h"
#include "kiwi/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

static bool has_duplicate_keys(const kiwi_json *j)
{
	if (YAJL_IS_OBJECT(j)) {
		size_t n = j->u.object.len;
		for (size_t i = 0; i < n; i++) {
			for (size_t k = i + 1; k < n; k++)
				if (!strcmp(j->u.object.keys[i], j->u.object.keys[k]))
					return true;
			if (has_duplicate_keys(j->u.object.values[i]))
				return true;
		}
	} else if (YAJL_IS_ARRAY(j)) {
		for (size_t i = 0; i < j->u.array.len; i++)
			if (has_duplicate_keys(j->u.array.values[i]))
				return true;
	}
	return false;
}

/* The deepest nesting of arrays and objects, brackets in strings aside. */
static size_t max_depth(const char *text, size_t len)
{
	size_t depth = 0, deepest = 0;
	bool in_string = false, escaped = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			if (++depth > deepest)
				deepest = depth;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return deepest;
}

kiwi_json *kiwi_json_parse(const char *text, size_t len, kiwi_err *err)
{
	if (memchr(text, '\0', len)) {
		kiwi_error(err, EINVAL, "json", "input contains a NUL byte");
		return NULL;
	}
	if (max_depth(text, len) > KIWI_JSON_MAX_DEPTH) {
		kiwi_error(err, EINVAL, "json", "nesting deeper than %d levels", KIWI_JSON_MAX_DEPTH);
		return NULL;
	}
	_cleanup_free_ char *copy = malloc(len + 1);
	if (!copy) {
		kiwi_error(err, ENOMEM, "json", "cannot copy %zu bytes", len);
		return NULL;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	char why[256] = "";
	kiwi_json *j = yajl_tree_parse(copy, why, sizeof(why));
	if (!j) {
		why[strcspn(why, "\n")] = '\0';
		kiwi_error(err, EINVAL, "json", "malformed JSON: %s", why[0] ? why : "parse error");
		return NULL;
	}
	if (has_duplicate_keys(j)) {
		yajl_tree_free(j);
		kiwi_error(err, EINVAL, "json", "an object repeats a key");
		return NULL;
	}
	return j;
}

kiwi_json *kiwi_json_parse_file(const char *path, size_t max_bytes, kiwi_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		kiwi_error(err, errno, "json", "cannot open `%s`", path);
		return NULL;
	}
	char what[512];
	snprintf(what, sizeof(what), "`%s`", path);
	_cleanup_free_ char *buf = NULL;
	size_t used = 0;
	if (kiwi_read_bounded(fd, max_bytes, what, &buf, &used, err) < 0)
		return NULL;
	kiwi_json *j = kiwi_json_parse(buf, used, err);
	if (!j)
		kiwi_error_wrap(err, "`%s`", path);
	return j;
}

void kiwi_json_free(kiwi_json *j)
{
	if (j)
		yajl_tree_free(j);
}

enum kiwi_json_type kiwi_json_type_of(const kiwi_json *j)
{
	if (!j)
		return KIWI_JSON_NULL;
	switch (j->type) {
	case yajl_t_string: return KIWI_JSON_STRING;
	case yajl_t_number: return KIWI_JSON_NUMBER;
	case yajl_t_object: return KIWI_JSON_OBJECT;
	case yajl_t_array: return KIWI_JSON_ARRAY;
	case yajl_t_true:
	case yajl_t_false: return KIWI_JSON_BOOL;
	case yajl_t_null:
	case yajl_t_any:
	default: return KIWI_JSON_NULL;
	}
}

const char *kiwi_json_type_name(enum kiwi_json_type t)
{
	static const char *const names[] = {
		[KIWI_JSON_NULL] = "null", [KIWI_JSON_BOOL] = "boolean",
		[KIWI_JSON_NUMBER] = "number", [KIWI_JSON_STRING] = "string",
		[KIWI_JSON_ARRAY] = "array", [KIWI_JSON_OBJECT] = "object",
	};
	return (unsigned)t < KIWI_ARRAY_SIZE(names) ? names[t] : "?";
}

const char *kiwi_json_string(const kiwi_json *j)
{
	return j && YAJL_IS_STRING(j) ? j->u.string : NULL;
}

bool kiwi_json_int(const kiwi_json *j, long long *out)
{
	if (!j || !YAJL_IS_INTEGER(j))
		return false;
	*out = j->u.number.i;
	return true;
}

bool kiwi_json_double(const kiwi_json *j, double *out)
{
	if (!j || !YAJL_IS_NUMBER(j))
		return false;
	*out = YAJL_IS_DOUBLE(j) ? j->u.number.d : (double)j->u.number.i;
	return true;
}

bool kiwi_json_bool(const kiwi_json *j, bool *out)
{
	if (!j || !(YAJL_IS_TRUE(j) || YAJL_IS_FALSE(j)))
		return false;
	*out = YAJL_IS_TRUE(j);
	return true;
}

const char *kiwi_json_number_text(const kiwi_json *j)
{
	return j && YAJL_IS_NUMBER(j) ? j->u.number.r : NULL;
}

size_t kiwi_json_len(const kiwi_json *j)
{
	if (j && YAJL_IS_ARRAY(j))
		return j->u.array.len;
	if (j && YAJL_IS_OBJECT(j))
		return j->u.object.len;
	return 0;
}

kiwi_json *kiwi_json_at(const kiwi_json *j, size_t i)
{
	if (j && YAJL_IS_ARRAY(j) && i < j->u.array.len)
		return j->u.array.values[i];
	if (j && YAJL_IS_OBJECT(j) && i < j->u.object.len)
		return j->u.object.values[i];
	return NULL;
}

const char *kiwi_json_key_at(const kiwi_json *j, size_t i)
{
	if (j && YAJL_IS_OBJECT(j) && i < j->u.object.len)
		return j->u.object.keys[i];
	return NULL;
}

kiwi_json *kiwi_json_get(const kiwi_json *j, const char *key)
{
	if (!j || !YAJL_IS_OBJECT(j))
		return NULL;
	for (size_t i = 0; i < j->u.object.len; i++)
		if (!strcmp(j->u.object.keys[i], key))
			return j->u.object.values[i];
	return NULL;
}

/* ---- writer ---- */
struct kiwi_json_writer {
	yajl_gen g;
};

kiwi_json_writer *kiwi_jw_new(bool pretty)
{
	kiwi_json_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->g = yajl_gen_alloc(NULL);
	if (!w->g) {
		free(w);
		return NULL;
	}
	yajl_gen_config(w->g, yajl_gen_beautify, pretty ? 1 : 0);
	yajl_gen_config(w->g, yajl_gen_validate_utf8, 1);
	return w;
}

void kiwi_jw_free(kiwi_json_writer *w)
{
	if (!w)
		return;
	yajl_gen_free(w->g);
	free(w);
}

void kiwi_jw_open_object(kiwi_json_writer *w) { yajl_gen_map_open(w->g); }
void kiwi_jw_close_object(kiwi_json_writer *w) { yajl_gen_map_close(w->g); }
void kiwi_jw_open_array(kiwi_json_writer *w) { yajl_gen_array_open(w->g); }
void kiwi_jw_close_array(kiwi_json_writer *w) { yajl_gen_array_close(w->g); }
void kiwi_jw_null(kiwi_json_writer *w) { yajl_gen_null(w->g); }
void kiwi_jw_bool(kiwi_json_writer *w, bool v) { yajl_gen_bool(w->g, v); }
void kiwi_jw_int(kiwi_json_writer *w, long long v) { yajl_gen_integer(w->g, v); }
void kiwi_jw_double(kiwi_json_writer *w, double v) { yajl_gen_double(w->g, v); }

void kiwi_jw_fixed(kiwi_json_writer *w, double v, int decimals)
{
	char num[64];
	int n = snprintf(num, sizeof(num), "%.*f", decimals, v);
	if (n <= 0 || n >= (int)sizeof(num) || v != v)
		yajl_gen_null(w->g);
	else
		yajl_gen_number(w->g, num, (size_t)n);
}

void kiwi_jw_key(kiwi_json_writer *w, const char *key)
{
	yajl_gen_string(w->g, (const unsigned char *)key, strlen(key));
}

void kiwi_jw_string(kiwi_json_writer *w, const char *s)
{
	if (!s) {
		yajl_gen_null(w->g);
		return;
	}
	/* Invalid UTF-8 (a command line is bytes) would make yajl drop the
	 * value; write a replacement marker instead of corrupting the object. */
	if (yajl_gen_string(w->g, (const unsigned char *)s, strlen(s)) == yajl_gen_invalid_string)
		yajl_gen_string(w->g, (const unsigned char *)"\xef\xbf\xbd", 3);
}

void kiwi_jw_value(kiwi_json_writer *w, const kiwi_json *j)
{
	switch (kiwi_json_type_of(j)) {
	case KIWI_JSON_OBJECT:
		kiwi_jw_open_object(w);
		for (size_t k = 0; k < j->u.object.len; k++) {
			kiwi_jw_key(w, j->u.object.keys[k]);
			kiwi_jw_value(w, j->u.object.values[k]);
		}
		kiwi_jw_close_object(w);
		break;
	case KIWI_JSON_ARRAY:
		kiwi_jw_open_array(w);
		for (size_t k = 0; k < j->u.array.len; k++)
			kiwi_jw_value(w, j->u.array.values[k]);
		kiwi_jw_close_array(w);
		break;
	case KIWI_JSON_STRING:
		kiwi_jw_string(w, j->u.string);
		break;
	case KIWI_JSON_NUMBER:
		yajl_gen_number(w->g, j->u.number.r, strlen(j->u.number.r));
		break;
	case KIWI_JSON_BOOL:
		kiwi_jw_bool(w, YAJL_IS_TRUE(j));
		break;
	case KIWI_JSON_NULL:
	default:
		kiwi_jw_null(w);
		break;
	}
}

const char *kiwi_jw_text(kiwi_json_writer *w, size_t *len)
{
	const unsigned char *buf = NULL;
	size_t l = 0;
	yajl_gen_get_buf(w->g, &buf, &l);
	if (len)
		*len = l;
	return (const char *)buf;
}
