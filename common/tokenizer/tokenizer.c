/* common/tokenizer/tokenizer.c: byte-level BPE from a HF tokenizer.json, exact to huggingface/tokenizers
 * (see tokenizer.h for the pipeline and the reference code each step follows).
 * Not here: other model types, byte_fallback, dropout, offsets, post-processors, chat templates (chat.c). */
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/log.h"
#include "core/utf8.h"

#define TOK_MAX_IDS         (1 << 24)        /* refuse vocabularies with ids beyond this (16.7M) */
#define TOK_MAX_TEXT        (1u << 30)       /* encode refuses longer inputs (ERR_TOO_BIG) */
#define TOK_CACHE_MAX_PIECE 64               /* bytes; longer pieces are merged every time */
#define TOK_CACHE_SLOTS     (1u << 17)       /* open-addressing slots; cleared at half full */
#define TOK_SMALL_WORD      48               /* symbols; above this the heap merge is used */

enum { TF_DEFINED = 1, TF_ADDED = 2, TF_SPECIAL = 4 };

typedef struct {
    uint32_t off, len;     /* decode bytes in tok->arena */
    uint8_t  flags;        /* TF_* */
} TokEntry;

typedef struct {
    int32_t  id;
    uint32_t off, len;     /* content (the text matched in input) in tok->arena */
    bool     lstrip, rstrip, single_word, special;
} AddedTok;

typedef struct {
    uint64_t h;
    uint32_t koff, klen;   /* key bytes in cache_keys; klen == 0: empty slot */
    uint32_t ioff, nids;   /* ids in cache_ids */
} CacheSlot;

typedef struct { int32_t id, prev, next; } Sym;          /* one BPE symbol of a piece */
typedef struct { int32_t rank, pos, new_id; } HeapEnt;   /* a candidate merge at symbol pos */

struct Tokenizer {
    TokBuf    arena;                  /* all token bytes and added-token contents */
    TokEntry *ent;                    /* [n_ent] by id */
    int32_t   n_ent;
    int32_t  *vslot;                  /* [vmask+1] vocab ids by hash of bytes, -1 empty */
    uint32_t  vmask;
    uint64_t *mkey;                   /* [mmask+1] merge pair (a << 32 | b), UINT64_MAX empty */
    int32_t  *mrank, *mnew;           /* [mmask+1] rank and merged id of mkey */
    uint32_t  mmask;
    int32_t   byte_id[256];           /* id of each single-byte token, -1 if none */
    int32_t   unk_id;                 /* model.unk_token id or -1 */
    bool      ignore_merges;          /* model.ignore_merges: whole-piece vocab hit first */
    AddedTok *added;
    int       n_added;
    uint8_t   added_first[256];       /* 1 when an added token starts with this byte */
    int       max_added_len;
    bool      nfc;                    /* normalizer NFC */
    pcre2_code *re_split[2];          /* Split pre-tokenizer regex, or NULL: [0] PCRE2's own Unicode tables
                                       * (fast), [1] with the Unicode 16 additions (see UNI16_EXTRA_L) */
    pcre2_code *re_bl[2];             /* ByteLevel use_regex (GPT-2 regex), or NULL; same [0]/[1] */
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    bool      add_prefix_space;       /* ByteLevel add_prefix_space */
    TokenizerSpecial sp;
    char     *chat_template, *bos_text;
    /* piece cache (tokenizer.h: encode is single-threaded per Tokenizer) */
    CacheSlot *cache;
    uint32_t  cache_count;
    TokBuf    cache_keys;
    TokIds    cache_ids;
    /* scratch, reused across calls */
    TokBuf    clean, norm, piece;
    Sym      *sym;
    int32_t  *prank;
    HeapEnt  *heap;
    size_t    sym_cap, heap_cap;
    size_t   *cuts;                   /* [2 * ncuts] piece boundaries of the current segment */
    size_t    cuts_cap;               /* pairs */
    size_t   *cuts1;                  /* copy of the Split cuts while ByteLevel's regex reuses cuts */
    size_t    cuts1_cap;              /* elements */
};

/* ------------------------------------------------------------------------------------------ buffers */

void tok_ids_free(TokIds *ids) {
    if (!ids) return;
    xfree(ids->v);
    ids->v = NULL; ids->n = ids->cap = 0;
}

static void ids_reserve(TokIds *ids, size_t extra) {
    if (ids->cap - ids->n >= extra) return;
    size_t cap = ids->cap ? ids->cap : 64;
    while (cap - ids->n < extra) cap *= 2;
    ids->v = xrealloc(ids->v, cap * sizeof *ids->v);
    ids->cap = cap;
}

void tok_ids_push(TokIds *ids, int32_t id) {
    ids_reserve(ids, 1);
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

static void bytelevel_init(void) {
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
static void bytelevel_decode(const char *s, size_t len, TokBuf *out) {
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

/* ------------------------------------------------------------------------------------------ hash tables */

static inline uint64_t hash_bytes(const void *p, size_t n) { return XXH3_64bits(p, n); }
static inline uint64_t hash_pair(uint64_t k) { return (k ^ (k >> 29)) * 0x9E3779B97F4A7C15ull; }

static uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n * 2) c <<= 1;
    return c;
}

static int32_t vocab_find(const Tokenizer *t, const void *p, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(p, n) & t->vmask;
    for (;;) {
        int32_t id = t->vslot[i];
        if (id < 0) return -1;
        const TokEntry *e = &t->ent[id];
        if (e->len == n && memcmp(t->arena.v + e->off, p, n) == 0) return id;
        i = (i + 1) & t->vmask;
    }
}

static void vocab_insert(Tokenizer *t, int32_t id) {
    const TokEntry *e = &t->ent[id];
    uint32_t i = (uint32_t)hash_bytes(t->arena.v + e->off, e->len) & t->vmask;
    while (t->vslot[i] >= 0) {
        const TokEntry *o = &t->ent[t->vslot[i]];
        if (o->len == e->len && memcmp(t->arena.v + o->off, t->arena.v + e->off, e->len) == 0) return;
        i = (i + 1) & t->vmask;
    }
    t->vslot[i] = id;
}

static inline bool merge_find(const Tokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *new_id) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t i = (uint32_t)(hash_pair(k) >> 32) & t->mmask;
    for (;;) {
        uint64_t s = t->mkey[i];
        if (s == k) { *rank = t->mrank[i]; *new_id = t->mnew[i]; return true; }
        if (s == UINT64_MAX) return false;
        i = (i + 1) & t->mmask;
    }
}

/* Later duplicates overwrite earlier ones, as tokenizers' HashMap collect does. */
static void merge_insert(Tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t new_id) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t i = (uint32_t)(hash_pair(k) >> 32) & t->mmask;
    while (t->mkey[i] != UINT64_MAX && t->mkey[i] != k) i = (i + 1) & t->mmask;
    t->mkey[i] = k; t->mrank[i] = rank; t->mnew[i] = new_id;
}

/* ------------------------------------------------------------------------------------------ loading */

#define TJ "tokenizer.json: "

static const char *json_type_name(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object"; case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string"; case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number"; case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional boolean member: absent/null -> dflt; other non-bool -> error. */
static int get_bool(const json_t *o, const char *key, bool dflt, bool *out, const char *path, char err[ERR_LEN]) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_boolean(v))
        return err_set(err, ERR_DECODE, TJ "%s.%s: expected a boolean, got %s", path, key, json_type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* Regex rewrite for PCRE2, so that it matches what tokenizers' Oniguruma matches:
 * - \s: Oniguruma's is Unicode White_Space; PCRE2's (UCP) is \p{Xps}, which lacks U+0085. Spelled out.
 * - \p{L}, \p{N}: PCRE2 10.42 has Unicode 14 tables, the Oniguruma inside tokenizers 0.23 has Unicode 16.
 *   The code points that are L / N only in the latter are added explicitly (there are none the other way).
 *   The tables below were computed by comparing, for every code point, HF tokenizers' Split(Regex("\p{L}"))
 *   with PCRE2's \p{L} (and \s, \p{N} likewise; \s agreed exactly with WS_CLASS). A newer PCRE2 only makes
 *   the additions redundant. */
static const char UNI16_EXTRA_L[] =
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}"
    "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}"
    "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}"
    "\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}"
    "\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-\\x{16D6C}\\x{18CFF}"
    "\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}"
    "\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}";
static const char UNI16_EXTRA_N[] =
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}"
    "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}";
#define WS_CLASS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

static int regex_rewrite(const char *in, bool extras, TokBuf *out) {
    bool in_class = false;
    for (size_t i = 0; in[i]; i++) {
        char c = in[i];
        if (c == '\\' && in[i + 1]) {
            char d = in[++i];
            if (d == 's') {
                if (in_class) tok_buf_append(out, WS_CLASS, strlen(WS_CLASS));
                else tok_buf_append(out, "[" WS_CLASS "]", strlen(WS_CLASS) + 2);
            } else if (d == 'S') {
                if (in_class) return -1;
                tok_buf_append(out, "[^" WS_CLASS "]", strlen(WS_CLASS) + 3);
            } else if (extras && d == 'p' && (!strncmp(in + i + 1, "{L}", 3) || !strncmp(in + i + 1, "{N}", 3))) {
                const char *extra = in[i + 2] == 'L' ? UNI16_EXTRA_L : UNI16_EXTRA_N;
                if (!in_class) tok_buf_append(out, "[", 1);
                tok_buf_append(out, in[i + 2] == 'L' ? "\\p{L}" : "\\p{N}", 5);
                tok_buf_append(out, extra, strlen(extra));
                if (!in_class) tok_buf_append(out, "]", 1);
                i += 3;
            } else {
                char e[2] = { c, d };
                tok_buf_append(out, e, 2);
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            tok_buf_append(out, "[", 1);
            if (in[i + 1] == '^') { tok_buf_append(out, "^", 1); i++; }
            if (in[i + 1] == ']') { tok_buf_append(out, "]", 1); i++; }   /* leading ] is a literal */
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        tok_buf_append(out, &c, 1);
    }
    if (!out->v) tok_buf_append(out, "", 0);
    return 0;
}

static pcre2_code *regex_compile(const char *pattern, bool extras, const char *path, char err[ERR_LEN]) {
    TokBuf rw = {0};
    if (regex_rewrite(pattern, extras, &rw) < 0) {
        tok_buf_free(&rw);
        err_set(err, ERR_UNSUPPORTED, TJ "%s: \\S inside a character class is not supported", path);
        return NULL;
    }
    int ec; PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rw.v, rw.n, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    tok_buf_free(&rw);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        err_set(err, ERR_DECODE, TJ "%s: regex does not compile: %s", path, (const char *)msg);
        return NULL;
    }
    if (pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) != 0)
        log_warn("%s: PCRE2 JIT unavailable for %s; using the interpreter (slower)", __func__, path);
    return re;
}

/* tokenizers pre_tokenizers/byte_level.rs RE (GPT-2). */
static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_bytelevel(Tokenizer *t, const json_t *o, const char *path, char err[ERR_LEN]) {
    bool use_regex;
    int rc;
    if ((rc = get_bool(o, "add_prefix_space", true, &t->add_prefix_space, path, err)) < 0) return rc;
    if ((rc = get_bool(o, "use_regex", true, &use_regex, path, err)) < 0) return rc;
    if (use_regex && (!(t->re_bl[0] = regex_compile(GPT2_RE, false, path, err)) ||
                      !(t->re_bl[1] = regex_compile(GPT2_RE, true, path, err))))
        return ERR_DECODE;
    return 0;
}

static int load_split(Tokenizer *t, const json_t *o, const char *path, char err[ERR_LEN]) {
    json_t *pat = json_object_get(o, "pattern");
    json_t *re = pat ? json_object_get(pat, "Regex") : NULL;
    if (!json_is_string(re))
        return err_set(err, ERR_UNSUPPORTED, TJ "%s.pattern: only {\"Regex\": \"...\"} patterns are supported", path);
    json_t *beh = json_object_get(o, "behavior");
    if (!json_is_string(beh) || strcmp(json_string_value(beh), "Isolated") != 0)
        return err_set(err, ERR_UNSUPPORTED, TJ "%s.behavior: only \"Isolated\" is supported", path);
    bool invert;
    int rc = get_bool(o, "invert", false, &invert, path, err);
    if (rc < 0) return rc;
    if (invert) return err_set(err, ERR_UNSUPPORTED, TJ "%s.invert: true is not supported", path);
    if (t->re_split[0]) return err_set(err, ERR_UNSUPPORTED, TJ "%s: only one Split pre-tokenizer is supported", path);
    char p2[96];
    snprintf(p2, sizeof p2, "%s.pattern.Regex", path);
    if (!(t->re_split[0] = regex_compile(json_string_value(re), false, p2, err))) return ERR_DECODE;
    return (t->re_split[1] = regex_compile(json_string_value(re), true, p2, err)) ? 0 : ERR_DECODE;
}

static int load_pretokenizer(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *pt = json_object_get(root, "pre_tokenizer");
    if (!json_is_object(pt))
        return err_set(err, ERR_UNSUPPORTED, TJ "pre_tokenizer: a ByteLevel pre-tokenizer is required");
    const char *type = json_string_value(json_object_get(pt, "type"));
    if (!type) return err_set(err, ERR_DECODE, TJ "pre_tokenizer.type: expected a string");
    if (!strcmp(type, "ByteLevel")) return load_bytelevel(t, pt, "pre_tokenizer", err);
    if (strcmp(type, "Sequence") != 0)
        return err_set(err, ERR_UNSUPPORTED, TJ "pre_tokenizer.type: \"%s\" is not supported", type);
    json_t *seq = json_object_get(pt, "pretokenizers");
    if (!json_is_array(seq)) return err_set(err, ERR_DECODE, TJ "pre_tokenizer.pretokenizers: expected an array");
    bool have_bl = false;
    for (size_t i = 0; i < json_array_size(seq); i++) {
        json_t *o = json_array_get(seq, i);
        char path[64];
        snprintf(path, sizeof path, "pre_tokenizer.pretokenizers[%zu]", i);
        const char *ty = json_is_object(o) ? json_string_value(json_object_get(o, "type")) : NULL;
        if (!ty) return err_set(err, ERR_DECODE, TJ "%s.type: expected a string", path);
        int rc;
        if (!strcmp(ty, "Split") && !have_bl) rc = load_split(t, o, path, err);
        else if (!strcmp(ty, "ByteLevel") && !have_bl) { rc = load_bytelevel(t, o, path, err); have_bl = true; }
        else rc = err_set(err, ERR_UNSUPPORTED, TJ "%s: \"%s\" is not supported here (Split then ByteLevel)", path, ty);
        if (rc < 0) return rc;
    }
    if (!have_bl) return err_set(err, ERR_UNSUPPORTED, TJ "pre_tokenizer.pretokenizers: no ByteLevel step");
    return 0;
}

static int load_normalizer(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *n = json_object_get(root, "normalizer");
    if (!n || json_is_null(n)) return 0;
    const char *type = json_is_object(n) ? json_string_value(json_object_get(n, "type")) : NULL;
    if (!type) return err_set(err, ERR_DECODE, TJ "normalizer.type: expected a string");
    if (!strcmp(type, "NFC")) { t->nfc = true; return 0; }
    if (!strcmp(type, "Sequence")) {
        json_t *seq = json_object_get(n, "normalizers");
        if (!json_is_array(seq)) return err_set(err, ERR_DECODE, TJ "normalizer.normalizers: expected an array");
        for (size_t i = 0; i < json_array_size(seq); i++) {
            const char *ty = json_string_value(json_object_get(json_array_get(seq, i), "type"));
            if (!ty || strcmp(ty, "NFC") != 0)
                return err_set(err, ERR_UNSUPPORTED, TJ "normalizer.normalizers[%zu]: only NFC is supported", i);
            t->nfc = true;
        }
        return 0;
    }
    return err_set(err, ERR_UNSUPPORTED, TJ "normalizer.type: \"%s\" is not supported (NFC or none)", type);
}

/* Registers id with decode bytes from token string s (ByteLevel decode rule). */
static int entry_set(Tokenizer *t, int64_t id, const char *s, size_t len, uint8_t flags) {
    if (id < 0 || id >= TOK_MAX_IDS) return -1;
    if (id >= t->n_ent) {
        int32_t n = t->n_ent ? t->n_ent : 1024;
        while (n <= id) n *= 2;
        t->ent = xrealloc(t->ent, (size_t)n * sizeof *t->ent);
        memset(t->ent + t->n_ent, 0, (size_t)(n - t->n_ent) * sizeof *t->ent);
        t->n_ent = n;
    }
    size_t off = t->arena.n;
    bytelevel_decode(s, len, &t->arena);
    t->ent[id].off = (uint32_t)off;
    t->ent[id].len = (uint32_t)(t->arena.n - off);
    t->ent[id].flags = flags | TF_DEFINED;
    return 0;
}

/* Model token string -> bytes lookup key (same ByteLevel rule), in scratch. */
static int32_t vocab_find_str(Tokenizer *t, const char *s, size_t len) {
    t->piece.n = 0;
    bytelevel_decode(s, len, &t->piece);
    return vocab_find(t, t->piece.v, t->piece.n);
}

static int load_vocab(Tokenizer *t, const json_t *model, char err[ERR_LEN]) {
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return err_set(err, ERR_DECODE, TJ "model.vocab: expected an object, got %s", vocab ? json_type_name(vocab) : "nothing");
    size_t nv = json_object_size(vocab);
    if (nv == 0) return err_set(err, ERR_DECODE, TJ "model.vocab: empty");
    int64_t max_id = -1;
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        const char *k = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        json_t *v = json_object_iter_value(it);
        if (!json_is_integer(v) || entry_set(t, json_integer_value(v), k, klen, 0) < 0)
            return err_set(err, ERR_DECODE, TJ "model.vocab[\"%.40s\"]: expected an id in [0, %d), got %s", k,
                           TOK_MAX_IDS, json_type_name(v));
        if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
        if (klen == 0) return err_set(err, ERR_DECODE, TJ "model.vocab: empty token string");
    }
    t->vmask = pow2_at_least(nv) - 1;
    t->vslot = xmalloc(((size_t)t->vmask + 1) * sizeof *t->vslot);
    memset(t->vslot, 0xff, ((size_t)t->vmask + 1) * sizeof *t->vslot);
    for (int32_t id = 0; id <= max_id; id++)
        if (t->ent[id].flags & TF_DEFINED) vocab_insert(t, id);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = vocab_find(t, &c, 1);
    }
    return 0;
}

static int merge_part(Tokenizer *t, const char *s, size_t len, size_t i, TokBuf *cat, int32_t *id, char err[ERR_LEN]) {
    *id = vocab_find_str(t, s, len);
    if (*id < 0) return err_set(err, ERR_DECODE, TJ "model.merges[%zu]: token \"%.40s\" is not in the vocab", i, s);
    tok_buf_append(cat, t->piece.v, t->piece.n);
    return 0;
}

static int load_merges(Tokenizer *t, const json_t *model, char err[ERR_LEN]) {
    json_t *merges = json_object_get(model, "merges");
    if (!merges || json_is_null(merges)) merges = NULL;
    else if (!json_is_array(merges))
        return err_set(err, ERR_DECODE, TJ "model.merges: expected an array, got %s", json_type_name(merges));
    size_t nm = merges ? json_array_size(merges) : 0;
    if (nm > (size_t)TOK_MAX_IDS) return err_set(err, ERR_TOO_BIG, TJ "model.merges: %zu entries", nm);
    t->mmask = pow2_at_least(nm) - 1;
    size_t ns = (size_t)t->mmask + 1;
    t->mkey = xmalloc(ns * sizeof *t->mkey);
    memset(t->mkey, 0xff, ns * sizeof *t->mkey);
    t->mrank = xmalloc(ns * sizeof *t->mrank);
    t->mnew = xmalloc(ns * sizeof *t->mnew);
    TokBuf cat = {0};
    int rc = 0;
    for (size_t i = 0; i < nm && rc == 0; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t alen, blen;
        if (json_is_string(m)) {                       /* "a b": exactly one space (tokenizers: split(' ')) */
            a = json_string_value(m);
            size_t len = json_string_length(m);
            const char *sp = memchr(a, ' ', len);
            if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - a))) {
                rc = err_set(err, ERR_DECODE, TJ "model.merges[%zu]: expected \"a b\" (one space)", i);
                break;
            }
            alen = (size_t)(sp - a); b = sp + 1; blen = len - alen - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0)); alen = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1)); blen = json_string_length(json_array_get(m, 1));
        } else {
            rc = err_set(err, ERR_DECODE, TJ "model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"], got %s", i,
                         json_type_name(m));
            break;
        }
        int32_t ia, ib;
        cat.n = 0;
        if ((rc = merge_part(t, a, alen, i, &cat, &ia, err)) < 0) break;
        if ((rc = merge_part(t, b, blen, i, &cat, &ib, err)) < 0) break;
        int32_t inew = vocab_find(t, cat.v, cat.n);
        if (inew < 0) { rc = err_set(err, ERR_DECODE, TJ "model.merges[%zu]: merged token is not in the vocab", i); break; }
        merge_insert(t, ia, ib, (int32_t)i, inew);
    }
    tok_buf_free(&cat);
    return rc;
}

static int load_model(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return err_set(err, ERR_DECODE, TJ "model: expected an object");
    json_t *type = json_object_get(model, "type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0))
        return err_set(err, ERR_UNSUPPORTED, TJ "model.type: only \"BPE\" is supported");
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        return err_set(err, ERR_UNSUPPORTED, TJ "model.dropout: BPE dropout is not supported");
    const char *keys[2] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(model, keys[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return err_set(err, ERR_UNSUPPORTED, TJ "model.%s: not supported (must be empty)", keys[i]);
    }
    bool bf;
    int rc;
    if ((rc = get_bool(model, "byte_fallback", false, &bf, "model", err)) < 0) return rc;
    if (bf) return err_set(err, ERR_UNSUPPORTED, TJ "model.byte_fallback: true is not supported");
    if ((rc = get_bool(model, "ignore_merges", false, &t->ignore_merges, "model", err)) < 0) return rc;
    if ((rc = load_vocab(t, model, err)) < 0) return rc;
    t->unk_id = -1;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        t->unk_id = vocab_find_str(t, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0) return err_set(err, ERR_DECODE, TJ "model.unk_token: not in the vocab");
    }
    return load_merges(t, model, err);
}

static int load_added(Tokenizer *t, const json_t *root, char err[ERR_LEN]) {
    json_t *arr = json_object_get(root, "added_tokens");
    if (!arr || json_is_null(arr)) return 0;
    if (!json_is_array(arr)) return err_set(err, ERR_DECODE, TJ "added_tokens: expected an array");
    size_t n = json_array_size(arr);
    t->added = xcalloc(n ? n : 1, sizeof *t->added);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        char path[48];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!json_is_object(o)) return err_set(err, ERR_DECODE, TJ "%s: expected an object", path);
        json_t *id = json_object_get(o, "id"), *content = json_object_get(o, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= TOK_MAX_IDS)
            return err_set(err, ERR_DECODE, TJ "%s.id: expected an id in [0, %d)", path, TOK_MAX_IDS);
        if (!json_is_string(content) || json_string_length(content) == 0)
            return err_set(err, ERR_DECODE, TJ "%s.content: expected a non-empty string", path);
        AddedTok *a = &t->added[t->n_added];
        int rc;
        if ((rc = get_bool(o, "special", false, &a->special, path, err)) < 0 ||
            (rc = get_bool(o, "lstrip", false, &a->lstrip, path, err)) < 0 ||
            (rc = get_bool(o, "rstrip", false, &a->rstrip, path, err)) < 0 ||
            (rc = get_bool(o, "single_word", false, &a->single_word, path, err)) < 0)
            return rc;
        a->id = (int32_t)json_integer_value(id);
        a->len = (uint32_t)json_string_length(content);
        a->off = (uint32_t)t->arena.n;
        tok_buf_append(&t->arena, json_string_value(content), a->len);
        entry_set(t, a->id, json_string_value(content), a->len, TF_ADDED | (a->special ? TF_SPECIAL : 0));
        t->added_first[(uint8_t)json_string_value(content)[0]] = 1;
        if ((int)a->len > t->max_added_len) t->max_added_len = (int)a->len;
        t->n_added++;
    }
    return 0;
}

static int load_decoder(const json_t *root, char err[ERR_LEN]) {
    json_t *d = json_object_get(root, "decoder");
    const char *type = json_is_object(d) ? json_string_value(json_object_get(d, "type")) : NULL;
    if (!type || strcmp(type, "ByteLevel") != 0)
        return err_set(err, ERR_UNSUPPORTED, TJ "decoder: only the ByteLevel decoder is supported");
    return 0;
}

/* tokenizer_config.json token fields are a string or {"content": string}. */
static const char *config_token(const json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int load_config(Tokenizer *t, const char *config, size_t config_len, char err[ERR_LEN]) {
    json_error_t je;
    json_t *cfg = json_loadb(config, config_len, JSON_ALLOW_NUL, &je);
    if (!cfg) return err_set(err, ERR_DECODE, "tokenizer_config.json: line %d column %d: %s", je.line, je.column, je.text);
    int rc = 0;
    if (!json_is_object(cfg)) { rc = err_set(err, ERR_DECODE, "tokenizer_config.json: expected an object"); goto out; }
    json_t *ct = json_object_get(cfg, "chat_template");
    if (json_is_array(ct)) {                       /* [{"name": "default", "template": "..."}, ...] */
        json_t *pick = NULL;
        for (size_t i = 0; i < json_array_size(ct); i++) {
            json_t *e = json_array_get(ct, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, "default")) pick = json_object_get(e, "template");
        }
        ct = pick;
    }
    if (ct && !json_is_null(ct) && !json_is_string(ct)) {
        rc = err_set(err, ERR_DECODE, "tokenizer_config.json: chat_template: expected a string");
        goto out;
    }
    if (json_is_string(ct)) t->chat_template = xstrdup(json_string_value(ct));
    const char *bos = config_token(cfg, "bos_token"), *eos = config_token(cfg, "eos_token"),
               *pad = config_token(cfg, "pad_token");
    t->bos_text = xstrdup(bos ? bos : "");
    if (bos) t->sp.bos = tokenizer_token_id(t, bos, strlen(bos));
    if (eos) t->sp.eos = tokenizer_token_id(t, eos, strlen(eos));
    if (pad) t->sp.pad = tokenizer_token_id(t, pad, strlen(pad));
out:
    json_decref(cfg);
    return rc;
}

Tokenizer *tokenizer_load_mem(const char *json, size_t json_len, const char *config, size_t config_len,
                              char err[ERR_LEN]) {
    if (!json) { err_set(err, ERR_INVAL, "tokenizer_load_mem: NULL document"); return NULL; }
    bytelevel_init();
    json_error_t je;
    json_t *root = json_loadb(json, json_len, JSON_ALLOW_NUL, &je);
    if (!root) {
        err_set(err, ERR_DECODE, TJ "line %d column %d (byte %d): %s", je.line, je.column, je.position, je.text);
        return NULL;
    }
    Tokenizer *t = xcalloc(1, sizeof *t);
    t->sp = (TokenizerSpecial){ -1, -1, -1, -1, -1, -1 };
    int rc;
    if (!json_is_object(root)) { rc = err_set(err, ERR_DECODE, TJ "top level: expected an object"); goto fail; }
    if ((rc = load_model(t, root, err)) < 0 || (rc = load_added(t, root, err)) < 0 ||
        (rc = load_normalizer(t, root, err)) < 0 || (rc = load_pretokenizer(t, root, err)) < 0 ||
        (rc = load_decoder(root, err)) < 0)
        goto fail;
    t->sp.endoftext = tokenizer_token_id(t, "<|endoftext|>", 13);
    t->sp.im_start = tokenizer_token_id(t, "<|im_start|>", 12);
    t->sp.im_end = tokenizer_token_id(t, "<|im_end|>", 10);
    if (config && (rc = load_config(t, config, config_len, err)) < 0) goto fail;
    if (!t->bos_text) t->bos_text = xstrdup("");
    t->md = pcre2_match_data_create(4, NULL);
    t->mctx = pcre2_match_context_create(NULL);
    t->jstack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!t->md || !t->mctx || !t->jstack) { rc = err_set(err, ERR_NOMEM, "tokenizer: PCRE2 allocation failed"); goto fail; }
    pcre2_jit_stack_assign(t->mctx, NULL, t->jstack);
    t->cache = xcalloc(TOK_CACHE_SLOTS, sizeof *t->cache);
    json_decref(root);
    return t;
fail:
    json_decref(root);
    tokenizer_free(t);
    return NULL;
}

static char *read_file(const char *path, size_t *len, char err[ERR_LEN]) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set(err, ERR_IO, "%s: %s", path, strerror(errno)); return NULL; }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) { cap = cap ? cap * 2 : 1 << 20; buf = xrealloc(buf, cap); }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { xfree(buf); err_set(err, ERR_IO, "%s: read error", path); return NULL; }
    *len = n;
    return buf;
}

Tokenizer *tokenizer_load(const char *dir, char err[ERR_LEN]) {
    if (!dir) { err_set(err, ERR_INVAL, "tokenizer_load: NULL dir"); return NULL; }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    size_t len, clen = 0;
    char *json = read_file(path, &len, err);
    if (!json) return NULL;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *cfg = NULL;
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
        if (!(cfg = read_file(path, &clen, err))) { xfree(json); return NULL; }
    }
    Tokenizer *t = tokenizer_load_mem(json, len, cfg, clen, err);
    xfree(json);
    xfree(cfg);
    if (!t && err) {                                        /* say which directory */
        char tmp[ERR_LEN];
        snprintf(tmp, sizeof tmp, "%s: %s", dir, err);
        memcpy(err, tmp, ERR_LEN);
    }
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    tok_buf_free(&t->arena);
    xfree(t->ent); xfree(t->vslot); xfree(t->mkey); xfree(t->mrank); xfree(t->mnew); xfree(t->added);
    for (int k = 0; k < 2; k++) { pcre2_code_free(t->re_split[k]); pcre2_code_free(t->re_bl[k]); }
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mctx);
    pcre2_jit_stack_free(t->jstack);
    xfree(t->chat_template); xfree(t->bos_text);
    xfree(t->cache);
    tok_buf_free(&t->cache_keys); tok_ids_free(&t->cache_ids);
    tok_buf_free(&t->clean); tok_buf_free(&t->norm); tok_buf_free(&t->piece);
    xfree(t->sym); xfree(t->prank); xfree(t->heap); xfree(t->cuts); xfree(t->cuts1);
    xfree(t);
}

/* ------------------------------------------------------------------------------------------ BPE */

static void sym_reserve(Tokenizer *t, size_t n) {
    if (n <= t->sym_cap) return;
    size_t cap = t->sym_cap ? t->sym_cap : 256;
    while (cap < n) cap *= 2;
    t->sym = xrealloc(t->sym, cap * sizeof *t->sym);
    t->prank = xrealloc(t->prank, cap * sizeof *t->prank);
    t->sym_cap = cap;
}

static inline bool heap_less(const HeapEnt *a, const HeapEnt *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(Tokenizer *t, size_t *n, HeapEnt e) {
    if (*n == t->heap_cap) {
        t->heap_cap = t->heap_cap ? t->heap_cap * 2 : 256;
        t->heap = xrealloc(t->heap, t->heap_cap * sizeof *t->heap);
    }
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &t->heap[p])) break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = e;
}

static HeapEnt heap_pop(Tokenizer *t, size_t *n) {
    HeapEnt top = t->heap[0], last = t->heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&t->heap[c + 1], &t->heap[c])) c++;
        if (!heap_less(&t->heap[c], &last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (*n > 0) t->heap[i] = last;
    return top;
}

/* Long words: tokenizers Word::merge_all — a min-heap of (rank, pos) over a linked list of symbols; stale
 * entries (symbol gone or pair changed) are skipped. O(n log n). */
static int32_t bpe_merge_heap(Tokenizer *t, int32_t ns) {
    Sym *s = t->sym;
    size_t nh = 0;
    for (int32_t i = 0; i < ns; i++) { s[i].prev = i - 1; s[i].next = i + 1 < ns ? i + 1 : -1; }
    for (int32_t i = 0; i + 1 < ns; i++) {
        int32_t r, nid;
        if (merge_find(t, s[i].id, s[i + 1].id, &r, &nid)) heap_push(t, &nh, (HeapEnt){ r, i, nid });
    }
    while (nh > 0) {
        HeapEnt m = heap_pop(t, &nh);
        Sym *a = &s[m.pos];
        if (a->id < 0 || a->next < 0) continue;
        Sym *b = &s[a->next];
        int32_t r, nid;
        if (!merge_find(t, a->id, b->id, &r, &nid) || nid != m.new_id) continue;
        a->id = nid;
        int32_t bnext = b->next;
        b->id = -1;                                  /* removed */
        a->next = bnext;
        if (bnext >= 0) s[bnext].prev = m.pos;
        if (a->prev >= 0 && merge_find(t, s[a->prev].id, a->id, &r, &nid))
            heap_push(t, &nh, (HeapEnt){ r, a->prev, nid });
        if (bnext >= 0 && merge_find(t, a->id, s[bnext].id, &r, &nid))
            heap_push(t, &nh, (HeapEnt){ r, m.pos, nid });
    }
    int32_t k = 0;
    for (int32_t i = 0; i >= 0 && i < ns; i = s[i].next) s[k++].id = s[i].id;
    return k;
}

/* Short words: the same order of merges (lowest rank, then leftmost) by scanning a rank-per-pair array;
 * each merge costs one memmove of at most TOK_SMALL_WORD entries. */
static int32_t bpe_merge_small(Tokenizer *t, int32_t ns) {
    Sym *s = t->sym;
    int32_t *pr = t->prank, nid = -1;
    for (int32_t i = 0; i + 1 < ns; i++)
        if (!merge_find(t, s[i].id, s[i + 1].id, &pr[i], &nid)) pr[i] = INT32_MAX;
    while (ns > 1) {
        int32_t best = INT32_MAX, bi = -1;
        for (int32_t i = 0; i + 1 < ns; i++)
            if (pr[i] < best) { best = pr[i]; bi = i; }
        if (bi < 0) break;
        int32_t r;
        merge_find(t, s[bi].id, s[bi + 1].id, &r, &nid);
        s[bi].id = nid;
        memmove(&s[bi + 1], &s[bi + 2], (size_t)(ns - bi - 2) * sizeof *s);
        memmove(&pr[bi + 1], &pr[bi + 2], (size_t)(ns > bi + 2 ? ns - bi - 3 : 0) * sizeof *pr);
        ns--;
        if (bi > 0 && !merge_find(t, s[bi - 1].id, s[bi].id, &pr[bi - 1], &nid)) pr[bi - 1] = INT32_MAX;
        if (bi + 1 < ns && !merge_find(t, s[bi].id, s[bi + 1].id, &pr[bi], &nid)) pr[bi] = INT32_MAX;
    }
    return ns;
}

static void cache_clear(Tokenizer *t) {
    if (t->cache) memset(t->cache, 0, TOK_CACHE_SLOTS * sizeof *t->cache);
    t->cache_count = 0;
    t->cache_keys.n = 0;
    t->cache_ids.n = 0;
}

void tokenizer_cache_clear(Tokenizer *t) { if (t) cache_clear(t); }

/* BPE-encodes one pre-token piece (raw bytes) and appends its ids. */
static void bpe_piece(Tokenizer *t, const uint8_t *p, size_t n, TokIds *out) {
    if (n == 0) return;
    if (n == 1 && t->byte_id[p[0]] >= 0) { tok_ids_push(out, t->byte_id[p[0]]); return; }
    if (t->ignore_merges) {
        int32_t id = vocab_find(t, p, n);
        if (id >= 0) { tok_ids_push(out, id); return; }
    }
    uint64_t h = 0;
    uint32_t slot = 0;
    bool cacheable = n <= TOK_CACHE_MAX_PIECE;
    if (cacheable) {
        h = hash_bytes(p, n);
        slot = (uint32_t)h & (TOK_CACHE_SLOTS - 1);
        for (;;) {
            CacheSlot *c = &t->cache[slot];
            if (c->klen == 0) break;
            if (c->h == h && c->klen == n && memcmp(t->cache_keys.v + c->koff, p, n) == 0) {
                ids_reserve(out, c->nids);
                memcpy(out->v + out->n, t->cache_ids.v + c->ioff, c->nids * sizeof(int32_t));
                out->n += c->nids;
                return;
            }
            slot = (slot + 1) & (TOK_CACHE_SLOTS - 1);
        }
    }
    sym_reserve(t, n);
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[p[i]];
        if (id < 0) id = t->unk_id;                  /* no unk: the byte is dropped, as tokenizers does */
        if (id >= 0) t->sym[ns++].id = id;
    }
    ns = ns <= TOK_SMALL_WORD ? bpe_merge_small(t, ns) : bpe_merge_heap(t, ns);
    size_t first = out->n;
    ids_reserve(out, (size_t)ns);
    for (int32_t i = 0; i < ns; i++) out->v[out->n++] = t->sym[i].id;
    if (!cacheable) return;
    if (t->cache_count >= TOK_CACHE_SLOTS / 2) {
        cache_clear(t);
        slot = (uint32_t)h & (TOK_CACHE_SLOTS - 1);
    }
    CacheSlot *c = &t->cache[slot];
    c->h = h;
    c->koff = (uint32_t)t->cache_keys.n;
    c->klen = (uint32_t)n;
    c->ioff = (uint32_t)t->cache_ids.n;
    c->nids = (uint32_t)ns;
    tok_buf_append(&t->cache_keys, p, n);
    ids_reserve(&t->cache_ids, (size_t)ns);
    memcpy(t->cache_ids.v + t->cache_ids.n, out->v + first, (size_t)ns * sizeof(int32_t));
    t->cache_ids.n += (size_t)ns;
    t->cache_count++;
}

/* ------------------------------------------------------------------------------------------ pre-tokenize */

static size_t utf8_char_len(const uint8_t *s, size_t n) {
    int r = utf8_step(s, n);
    return r > 0 ? (size_t)r : 1;
}

/* Cuts s[0..n) into pieces with re (Split behaviour Isolated: matches and the gaps between them) and appends
 * the [start, end) pairs (relative to base) to t->cuts. */
static void regex_cuts(Tokenizer *t, const pcre2_code *re, const char *s, size_t n, size_t base, size_t *ncut) {
    size_t gap = 0, off = 0;
#define CUT(a, b) do { \
        if (*ncut == t->cuts_cap) { t->cuts_cap = t->cuts_cap ? t->cuts_cap * 2 : 256; \
            t->cuts = xrealloc(t->cuts, t->cuts_cap * 2 * sizeof *t->cuts); } \
        t->cuts[2 * *ncut] = base + (a); t->cuts[2 * *ncut + 1] = base + (b); (*ncut)++; } while (0)
    while (off < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, off, PCRE2_NO_UTF_CHECK, t->md, t->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {                     /* resource limit on a pathological input: keep the rest whole */
            log_warn("%s: pcre2_match error %d at byte %zu; rest of the segment kept as one piece", __func__, rc, off);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) {                  /* empty match: step one character, it joins the next gap */
            off = ms + utf8_char_len((const uint8_t *)s + ms, n - ms);
            continue;
        }
        if (ms > gap) CUT(gap, ms);
        CUT(ms, me);
        gap = off = me;
    }
    if (n > gap) CUT(gap, n);
#undef CUT
}

/* True when s may hold a code point of UNI16_EXTRA_L/N (U+1C89.., U+A7CB.., planes 1-3 outside U+1Fxxx), so
 * the [1] regexes are needed; [0] and [1] agree on every other input. Conservative (a superset). */
static bool needs_unicode16(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i + 1 < n; i++) {
        uint8_t b = u[i];
        if (b < 0xE1) continue;
        if ((b == 0xE1 && u[i + 1] == 0xB2) || (b == 0xEA && u[i + 1] == 0x9F) || (b == 0xF0 && u[i + 1] != 0x9F))
            return true;
    }
    return false;
}

static void encode_pieces(Tokenizer *t, const char *s, size_t n, TokIds *out) {
    int x = (t->re_split[0] || t->re_bl[0]) && needs_unicode16(s, n);
    size_t ncut = 0;
    if (t->re_split[x]) regex_cuts(t, t->re_split[x], s, n, 0, &ncut);
    else { if (!t->cuts_cap) { t->cuts_cap = 256; t->cuts = xmalloc(512 * sizeof *t->cuts); } t->cuts[0] = 0; t->cuts[1] = n; ncut = 1; }
    if (t->re_bl[x] || t->add_prefix_space) {
        /* ByteLevel per split: optional prefix space, then optionally the GPT-2 regex (byte_level.rs) */
        size_t n1 = ncut;
        if (t->cuts1_cap < 2 * n1) {
            t->cuts1_cap = 2 * n1;
            t->cuts1 = xrealloc(t->cuts1, t->cuts1_cap * sizeof *t->cuts1);
        }
        memcpy(t->cuts1, t->cuts, 2 * n1 * sizeof *t->cuts1);
        TokBuf *tmp = &t->piece;                 /* scratch; only load-time lookups use it otherwise */
        for (size_t i = 0; i < n1; i++) {
            const char *p = s + t->cuts1[2 * i];
            size_t len = t->cuts1[2 * i + 1] - t->cuts1[2 * i];
            tmp->n = 0;
            if (t->add_prefix_space && p[0] != ' ') tok_buf_append(tmp, " ", 1);
            tok_buf_append(tmp, p, len);
            if (!t->re_bl[x]) { bpe_piece(t, (const uint8_t *)tmp->v, tmp->n, out); continue; }
            size_t nc = 0;
            regex_cuts(t, t->re_bl[x], tmp->v, tmp->n, 0, &nc);
            for (size_t k = 0; k < nc; k++)
                bpe_piece(t, (const uint8_t *)tmp->v + t->cuts[2 * k], t->cuts[2 * k + 1] - t->cuts[2 * k], out);
        }
        return;
    }
    for (size_t k = 0; k < ncut; k++)
        bpe_piece(t, (const uint8_t *)s + t->cuts[2 * k], t->cuts[2 * k + 1] - t->cuts[2 * k], out);
}

/* Normalizes one segment between added tokens, then pre-tokenizes and merges it. */
static int encode_segment(Tokenizer *t, const char *s, size_t n, TokIds *out, char err[ERR_LEN]) {
    if (n == 0) return 0;
    if (t->nfc) {
        bool fast = true;                 /* code points < U+0300 are NFC-stable: lead bytes < 0xCC */
        for (size_t i = 0; i < n; i++)
            if ((uint8_t)s[i] >= 0xCC) { fast = false; break; }
        if (!fast) {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (m < 0) return err_set(err, ERR_INVAL, "NFC normalization failed: %s", utf8proc_errmsg(m));
            t->norm.n = 0;
            tok_buf_append(&t->norm, dst, (size_t)m);
            free(dst);
            /* t->norm is not used by encode_pieces, so it stays valid while pieces are encoded */
            encode_pieces(t, t->norm.v, t->norm.n, out);
            return 0;
        }
    }
    encode_pieces(t, s, n, out);
    return 0;
}

static inline bool is_ascii_ws(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static inline bool is_word_byte(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

/* Leftmost-longest added token at or after pos; returns its index or -1, with the (stripped) span. */
static int added_find(const Tokenizer *t, const char *s, size_t n, size_t pos, size_t *ms, size_t *me) {
    for (size_t i = pos; i < n; i++) {
        if (!t->added_first[(uint8_t)s[i]]) continue;
        int best = -1;
        uint32_t blen = 0;
        for (int k = 0; k < t->n_added; k++) {
            const AddedTok *a = &t->added[k];
            if (a->len <= blen || a->len > n - i || memcmp(s + i, t->arena.v + a->off, a->len) != 0) continue;
            if (a->single_word && ((i > 0 && is_word_byte((uint8_t)s[i - 1])) ||
                                   (i + a->len < n && is_word_byte((uint8_t)s[i + a->len]))))
                continue;
            best = k; blen = a->len;
        }
        if (best < 0) continue;
        size_t a0 = i, a1 = i + blen;
        if (t->added[best].lstrip) while (a0 > pos && is_ascii_ws((uint8_t)s[a0 - 1])) a0--;
        if (t->added[best].rstrip) while (a1 < n && is_ascii_ws((uint8_t)s[a1])) a1++;
        *ms = a0; *me = a1;
        return best;
    }
    return -1;
}

int tokenizer_encode(Tokenizer *t, const char *text, size_t len, TokIds *out, char err[ERR_LEN]) {
    if (!t || !out || (!text && len)) return err_set(err, ERR_INVAL, "tokenizer_encode: NULL argument");
    if (len > TOK_MAX_TEXT) return err_set(err, ERR_TOO_BIG, "tokenizer_encode: %zu bytes (max %u)", len, TOK_MAX_TEXT);
    if (len == 0) return 0;
    if (tok_utf8_valid_prefix(text, len) != len) {
        t->clean.n = 0;
        tok_utf8_sanitize(text, len, &t->clean);
        text = t->clean.v;
        len = t->clean.n;
    }
    size_t pos = 0;
    while (pos < len) {
        size_t ms = len, me = len;
        int k = t->n_added ? added_find(t, text, len, pos, &ms, &me) : -1;
        int rc = encode_segment(t, text + pos, ms - pos, out, err);
        if (rc < 0) return rc;
        if (k < 0) break;
        tok_ids_push(out, t->added[k].id);
        pos = me;
    }
    return 0;
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
const char *tokenizer_chat_template(const Tokenizer *t) { return t->chat_template; }
const char *tokenizer_bos_text(const Tokenizer *t) { return t->bos_text ? t->bos_text : ""; }
