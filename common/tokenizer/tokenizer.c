/* common/tokenizer/tokenizer.c: byte-level BPE from a HF tokenizer.json, exact to huggingface/tokenizers
 * (see tokenizer.h for the pipeline and the reference code each step follows): buffers, UTF-8 sanitizing, the
 * byte-level map, decode and accessors; loading is tokenizer_load.c, encoding tokenizer_bpe.c.
 * Not here: other model types, byte_fallback, dropout, offsets, post-processors, chat templates (chat.c). */
#include "tokenizer/tokenizer_internal.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------ buffers */

void tok_ids_free(TokIds *ids) {
    if (!ids) return;
    xfree(ids->v);
    ids->v = NULL; ids->n = ids->cap = 0;
}

void tok__ids_reserve(TokIds *ids, size_t extra) {
    if (ids->cap - ids->n >= extra) return;
    size_t cap = ids->cap ? ids->cap : 64;
    while (cap - ids->n < extra) cap *= 2;
    ids->v = xrealloc(ids->v, cap * sizeof *ids->v);
    ids->cap = cap;
}

void tok_ids_push(TokIds *ids, int32_t id) {
    tok__ids_reserve(ids, 1);
    ids->v[ids->n++] = id;
}

void tok_buf_free(TokBuf *b) {
    if (!b) return;
    xfree(b->v);
    b->v = NULL; b->n = b->cap = 0;
}

static void buf_reserve(TokBuf *b, size_t extra) {
    if (b->cap > b->n && b->cap - b->n > extra) return;   /* room for extra + NUL */
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n <= extra) cap *= 2;
    b->v = xrealloc(b->v, cap);
    b->cap = cap;
}

void tok_buf_append(TokBuf *b, const void *p, size_t n) {
    buf_reserve(b, n);
    if (n) memcpy(b->v + b->n, p, n);
    b->n += n;
    b->v[b->n] = 0;
}

/* ------------------------------------------------------------------------------------------ UTF-8 */

/* utf8_step: core/utf8.h (one rule for the tokenizer and the verifier) */
size_t tok_utf8_valid_prefix(const char *s, size_t len) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        if (u[i] < 0x80) { i++; continue; }
        int r = utf8_step(u + i, len - i);
        if (r <= 0) break;
        i += (size_t)r;
    }
    return i;
}

static const char REPL[3] = { (char)0xEF, (char)0xBF, (char)0xBD };   /* U+FFFD */

size_t tok_utf8_sanitize(const char *s, size_t len, TokBuf *out) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, nrep = 0;
    buf_reserve(out, len);
    while (i < len) {
        size_t ok = tok_utf8_valid_prefix(s + i, len - i);
        tok_buf_append(out, s + i, ok);
        i += ok;
        if (i >= len) break;
        int r = utf8_step(u + i, len - i);
        tok_buf_append(out, REPL, 3);
        nrep++;
        i += r < 0 ? (size_t)-r : len - i;     /* r == 0: truncated sequence at the end, one U+FFFD */
    }
    if (!out->v) tok_buf_append(out, "", 0);
    return nrep;
}

/* ------------------------------------------------------------------------------------------ byte-level map */

/* GPT-2 bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 to U+0100... in order. */
static uint16_t g_byte_cp[256];
static int16_t  g_cp_byte[324];

void tok__bytelevel_init(void) {
    static int done;
    if (done) return;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        g_byte_cp[b] = (uint16_t)(keep ? b : 256 + n++);
    }
    for (int i = 0; i < 324; i++) g_cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) g_cp_byte[g_byte_cp[b]] = (int16_t)b;
    done = 1;   /* idempotent: a racing second init writes the same values */
}

/* Appends the ByteLevel-decoded bytes of token string s (tokenizers decoders/byte_level.rs: every char mapped
 * through CHAR_BYTES, or the raw UTF-8 of s when any char is not in the map). */
void tok__bytelevel_decode(const char *s, size_t len, TokBuf *out) {
    size_t start = out->n, i = 0;
    const uint8_t *u = (const uint8_t *)s;
    while (i < len) {
        int r = utf8_step(u + i, len - i);
        if (r <= 0) goto raw;
        int32_t cp;
        utf8proc_iterate(u + i, r, &cp);
        if (cp < 0 || cp >= 324 || g_cp_byte[cp] < 0) goto raw;
        uint8_t b = (uint8_t)g_cp_byte[cp];
        tok_buf_append(out, &b, 1);
        i += (size_t)r;
    }
    return;
raw:
    out->n = start;
    tok_buf_append(out, s, len);
}

/* ------------------------------------------------------------------------------------------ decode */

int tokenizer_decode(const Tokenizer *t, const int32_t *ids, size_t n, bool skip_special, TokBuf *out) {
    if (!t || !out || (!ids && n)) return ERR_INVAL;
    size_t start = out->n;
    if (!out->v) tok_buf_append(out, "", 0);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ent || !(t->ent[id].flags & TF_DEFINED)) continue;
        if (skip_special && (t->ent[id].flags & TF_SPECIAL)) continue;
        tok_buf_append(out, t->arena.v + t->ent[id].off, t->ent[id].len);
    }
    size_t len = out->n - start;
    if (tok_utf8_valid_prefix(out->v + start, len) == len) return 0;   /* the common case: no copy */
    TokBuf raw = {0};
    tok_buf_append(&raw, out->v + start, len);
    out->n = start;
    tok_utf8_sanitize(raw.v, raw.n, out);
    tok_buf_free(&raw);
    return 0;
}

void tok_stream_init(TokStream *s) { memset(s, 0, sizeof *s); }

int tok_stream_push(const Tokenizer *t, TokStream *s, int32_t id, bool skip_special, TokBuf *out) {
    if (!t || !s || !out) return ERR_INVAL;
    if (!out->v) tok_buf_append(out, "", 0);
    if (id < 0 || id >= t->n_ent || !(t->ent[id].flags & TF_DEFINED)) return 0;
    if (skip_special && (t->ent[id].flags & TF_SPECIAL)) return 0;
    const uint8_t *p = (const uint8_t *)t->arena.v + t->ent[id].off;
    size_t n = t->ent[id].len, i = 0;
    /* complete the held-back character first, one byte at a time */
    while (s->npend > 0 && i < n) {
        s->pend[s->npend++] = p[i++];
        int r = utf8_step(s->pend, (size_t)s->npend);
        if (r == 0) continue;
        if (r > 0) { tok_buf_append(out, s->pend, (size_t)r); s->npend = 0; break; }
        /* invalid: -r bytes become one U+FFFD; the rest (at most the byte just added) is re-scanned */
        tok_buf_append(out, REPL, 3);
        int rest = s->npend + r;
        i -= (size_t)rest;           /* the rejected tail bytes all came from p (pend held a valid prefix) */
        s->npend = 0;
    }
    while (i < n) {
        size_t ok = tok_utf8_valid_prefix((const char *)p + i, n - i);
        tok_buf_append(out, p + i, ok);
        i += ok;
        if (i >= n) break;
        int r = utf8_step(p + i, n - i);
        if (r == 0) {                /* a prefix of a character: hold it */
            memcpy(s->pend, p + i, n - i);
            s->npend = (int)(n - i);
            break;
        }
        tok_buf_append(out, REPL, 3);
        i += (size_t)-r;
    }
    return 0;
}

void tok_stream_finish(TokStream *s, TokBuf *out) {
    if (!out->v) tok_buf_append(out, "", 0);
    if (s->npend > 0) tok_buf_append(out, REPL, 3);
    s->npend = 0;
}

/* ------------------------------------------------------------------------------------------ accessors */

int tokenizer_vocab_size(const Tokenizer *t) {
    int32_t n = t->n_ent;
    while (n > 0 && !(t->ent[n - 1].flags & TF_DEFINED)) n--;
    return n;
}

const char *tokenizer_token_bytes(const Tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_ent || !(t->ent[id].flags & TF_DEFINED)) return NULL;
    if (len) *len = t->ent[id].len;
    return t->arena.v + t->ent[id].off;
}

int32_t tokenizer_token_id(const Tokenizer *t, const char *s, size_t len) {
    if (!t || !s) return -1;
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].len == len && memcmp(t->arena.v + t->added[k].off, s, len) == 0) return t->added[k].id;
    return t->vslot && len ? vocab_find(t, s, len) : -1;
}

bool tokenizer_is_special(const Tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_ent && (t->ent[id].flags & TF_SPECIAL);
}

const TokenizerSpecial *tokenizer_special(const Tokenizer *t) { return &t->sp; }

int tokenizer_stop_ids(const Tokenizer *t, int32_t out[3]) {
    int32_t cand[3] = {t->sp.eos, t->sp.im_end, t->sp.endoftext};
    int n = 0;
    for (int k = 0; k < 3; k++) {
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= out[j] == cand[k];
        if (cand[k] >= 0 && !dup) out[n++] = cand[k];
    }
    return n;
}
const char *tokenizer_chat_template(const Tokenizer *t) { return t->chat_template; }
const char *tokenizer_bos_text(const Tokenizer *t) { return t->bos_text ? t->bos_text : ""; }
