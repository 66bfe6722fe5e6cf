/* common/tokenizer/tokenizer_bpe.c: encode: added-token matching, pre-tokenization (the Split and ByteLevel regexes)
 * and byte-level BPE merges with a piece cache, exact to huggingface/tokenizers.
 * Not here: loading (tokenizer_load.c), decoding (tokenizer.c). */
#include "tokenizer/tokenizer_internal.h"

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
    XGROW(t->heap, *n, t->heap_cap, 256);
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
                tok__ids_reserve(out, c->nids);
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
    tok__ids_reserve(out, (size_t)ns);
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
    tok__ids_reserve(&t->cache_ids, (size_t)ns);
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
