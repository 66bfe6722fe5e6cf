/* common/core/utf8.h: UTF-8 validation and lossy repair with one rule for the whole project (the tokenizer's decode
 * and sanitize, the verifier's input repair): each maximal invalid subpart becomes one U+FFFD, as CPython's
 * bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do (Unicode 15 section 3.9, "U+FFFD
 * substitution of maximal subparts"; CPython Objects/stringlib/codecs.h).
 * Not here: code points, normalisation (tokenizer/, utf8proc). */
#ifndef DAPO_UTF8_H
#define DAPO_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The UTF-8 sequence at s[0..n), n >= 1: > 0 the length of one valid character; 0 when s is a proper prefix of a
 * valid sequence (more bytes needed); -k when its first k bytes are a maximal invalid subpart. */
int utf8_step(const uint8_t *s, size_t n);

/* Copies s[0..n) into out (at least 3 n bytes, caller-owned) with each maximal invalid subpart, and a truncated
 * sequence at the end, replaced by U+FFFD (EF BF BD); returns the bytes written. Valid input is copied unchanged. */
size_t utf8_repair(const char *s, size_t n, char *out);

#endif
