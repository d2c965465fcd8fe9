/* SPDX-License-Identifier: Apache-2.0 */
/* All JSON goes through this module, so the library underneath (yajl today)
 * can be swapped without touching callers: crun moved from yajl to json-c,
 * and some distributions no longer ship yajl. */
#ifndef KIWI_JSON_H
#define KIWI_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "kiwi/err.h"

/* ---- reading: a parsed tree ---- */
typedef struct yajl_val_s kiwi_json;

enum kiwi_json_type {
	KIWI_JSON_NULL,
	KIWI_JSON_BOOL,
	KIWI_JSON_NUMBER,
	KIWI_JSON_STRING,
	KIWI_JSON_ARRAY,
	KIWI_JSON_OBJECT,
};

/* No configuration needs deeper nesting; deeper input is refused before
 * any recursive code (ours or yajl's tree free) could run out of stack. */
#define KIWI_JSON_MAX_DEPTH 64

/* Parses len bytes (no NUL needed). Rejects duplicate object keys and
 * nesting deeper than KIWI_JSON_MAX_DEPTH.
 * On failure sets err (step "json") and returns NULL. */
kiwi_json *kiwi_json_parse(const char *text, size_t len, kiwi_err *err);
/* Reads at most max_bytes of path (more is an error), then parses it. */
kiwi_json *kiwi_json_parse_file(const char *path, size_t max_bytes, kiwi_err *err);
void kiwi_json_free(kiwi_json *j);

enum kiwi_json_type kiwi_json_type_of(const kiwi_json *j);
const char *kiwi_json_type_name(enum kiwi_json_type t);
const char *kiwi_json_string(const kiwi_json *j);          /* NULL unless a string */
bool kiwi_json_int(const kiwi_json *j, long long *out);    /* false unless an integer */
bool kiwi_json_double(const kiwi_json *j, double *out);    /* any number */
bool kiwi_json_bool(const kiwi_json *j, bool *out);
/* A number's text as written ("1.5", "512"), NULL unless a number: for
 * values that go through the same parser as a command-line flag. */
const char *kiwi_json_number_text(const kiwi_json *j);
size_t kiwi_json_len(const kiwi_json *j);                  /* array items or object keys */
kiwi_json *kiwi_json_at(const kiwi_json *j, size_t i);     /* array item or object value */
const char *kiwi_json_key_at(const kiwi_json *j, size_t i);/* object key, else NULL */
kiwi_json *kiwi_json_get(const kiwi_json *j, const char *key);

static inline void kiwi_json_freep(kiwi_json **j)
{
	kiwi_json_free(*j);
}
#define _cleanup_json_ __attribute__((cleanup(kiwi_json_freep)))

/* ---- writing: a streaming generator ---- */
typedef struct kiwi_json_writer kiwi_json_writer;

kiwi_json_writer *kiwi_jw_new(bool pretty);
void kiwi_jw_free(kiwi_json_writer *w);
void kiwi_jw_open_object(kiwi_json_writer *w);
void kiwi_jw_close_object(kiwi_json_writer *w);
void kiwi_jw_open_array(kiwi_json_writer *w);
void kiwi_jw_close_array(kiwi_json_writer *w);
void kiwi_jw_key(kiwi_json_writer *w, const char *key);
void kiwi_jw_string(kiwi_json_writer *w, const char *s);   /* NULL writes null */
void kiwi_jw_int(kiwi_json_writer *w, long long v);
void kiwi_jw_double(kiwi_json_writer *w, double v);
/* A number with a fixed count of decimals: 1.233, not 1.2330000000000000959. */
void kiwi_jw_fixed(kiwi_json_writer *w, double v, int decimals);
void kiwi_jw_bool(kiwi_json_writer *w, bool v);
void kiwi_jw_null(kiwi_json_writer *w);
/* Writes a parsed tree (or subtree) back out; numbers keep their original
 * text, so nothing is rounded on the way through. */
void kiwi_jw_value(kiwi_json_writer *w, const kiwi_json *j);
/* The text so far; valid until the next call on w. */
const char *kiwi_jw_text(kiwi_json_writer *w, size_t *len);

static inline void kiwi_jw_freep(kiwi_json_writer **w)
{
	kiwi_jw_free(*w);
}
#define _cleanup_jw_ __attribute__((cleanup(kiwi_jw_freep)))

#endif
