/* common/tokenizer/tokenizer_internal.h: what the tokenizer's three files share (not public; tokenizer.h is):
 * the Tokenizer struct, its limits, the vocabulary / merge hash tables (static inline: they are the hot path of
 * BPE) and the helpers tokenizer.c defines for tokenizer_load.c and tokenizer_bpe.c.
 *   tokenizer.c       buffers, UTF-8 sanitizing, the byte-level map, decode, accessors
 *   tokenizer_load.c  tokenizer.json / tokenizer_config.json: normalizer, pre-tokenizer, vocab, merges, added tokens
 *   tokenizer_bpe.c   pre-tokenization (Split / ByteLevel regexes, added tokens) and the BPE merge loop, encode
 * Not here: chat templates (chat.c). */
#ifndef DAPO_TOKENIZER_INTERNAL_H
#define DAPO_TOKENIZER_INTERNAL_H

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

/* ------------------------------------------------------------------------------------------ hash tables */

static inline uint64_t hash_bytes(const void *p, size_t n) { return XXH3_64bits(p, n); }
static inline uint64_t hash_pair(uint64_t k) { return (k ^ (k >> 29)) * 0x9E3779B97F4A7C15ull; }

static inline uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n * 2) c <<= 1;
    return c;
}

static inline int32_t vocab_find(const Tokenizer *t, const void *p, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(p, n) & t->vmask;
    for (;;) {
        int32_t id = t->vslot[i];
        if (id < 0) return -1;
        const TokEntry *e = &t->ent[id];
        if (e->len == n && memcmp(t->arena.v + e->off, p, n) == 0) return id;
        i = (i + 1) & t->vmask;
    }
}

static inline void vocab_insert(Tokenizer *t, int32_t id) {
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
static inline void merge_insert(Tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t new_id) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t i = (uint32_t)(hash_pair(k) >> 32) & t->mmask;
    while (t->mkey[i] != UINT64_MAX && t->mkey[i] != k) i = (i + 1) & t->mmask;
    t->mkey[i] = k; t->mrank[i] = rank; t->mnew[i] = new_id;
}

/* tokenizer.c */
void tok__ids_reserve(TokIds *ids, size_t extra);
void tok__bytelevel_init(void);
void tok__bytelevel_decode(const char *s, size_t len, TokBuf *out);

#endif
