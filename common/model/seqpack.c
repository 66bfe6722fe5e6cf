/* common/model/seqpack.c: chunking, packing and the response gather / scatter of seqpack.h. */
#include "model/seqpack.h"

#include <string.h>

struct SeqPack {
    Model   *m;
    long     T;                        /* model_max_tokens */
    int32_t *tok, *tgt, *cu;           /* [T], [T], [T + 1]: the packed batch */
    int     *r_off, *pos;              /* [T + 1], [T]: response offsets per sequence, packed position per token */
    float   *p_logp, *p_ent;           /* [T] model outputs at packed positions */
    float   *p_dlogp, *p_dent;         /* [T] backward inputs at packed positions */
    float   *r_logp, *r_ent, *r_dlogp, *r_dent;   /* [T] per response token (SeqChunk's arrays) */
    long    *len;                      /* [grown] sequence lengths of one for_chunks call */
    int      cap_len;
};

SeqPack *seqpack_new(Model *m) {
    SeqPack *p = xcalloc(1, sizeof *p);
    long T = model_max_tokens(m);
    p->m = m;
    p->T = T;
    p->tok = xmalloc((size_t)T * sizeof(int32_t));
    p->tgt = xmalloc((size_t)T * sizeof(int32_t));
    p->cu = xmalloc((size_t)(T + 1) * sizeof(int32_t));
    p->r_off = xmalloc((size_t)(T + 1) * sizeof(int));
    p->pos = xmalloc((size_t)T * sizeof(int));
    float **f[] = { &p->p_logp, &p->p_ent, &p->p_dlogp, &p->p_dent, &p->r_logp, &p->r_ent, &p->r_dlogp, &p->r_dent };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = xcalloc((size_t)T, sizeof(float));
    return p;
}

void seqpack_free(SeqPack *p) {
    if (!p) return;
    void *b[] = { p->tok, p->tgt, p->cu, p->r_off, p->pos, p->p_logp, p->p_ent, p->p_dlogp, p->p_dent, p->r_logp,
                  p->r_ent, p->r_dlogp, p->r_dent, p->len };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) xfree(b[i]);
    xfree(p);
}

int seqpack_chunk_end(const long *len, int a, int n, long max_tokens) {
    long tok = 0;
    int b = a;
    while (b < n) {
        if (b > a && tok + len[b] > max_tokens) break;
        tok += len[b];
        b++;
    }
    return b;
}

/* Packs sequences seq[0..n) of s into the scratch: tokens, next-token targets at response positions, cu_seqlens,
 * the response offsets and each response token's packed position (the position whose output predicts it). An empty
 * sequence keeps its (empty) response range but is left out of cu_seqlens (model_forward wants each one >= 1). */
static void pack(SeqPack *p, const SeqSet *s, const int *seq, int n, float temperature, SeqChunk *c) {
    int N = 0, R = 0, packed = 0;
    p->cu[0] = 0;
    p->r_off[0] = 0;
    for (int k = 0; k < n; k++) {
        int i = seq[k];
        int start = (int)s->offsets[i], len = (int)(s->offsets[i + 1] - s->offsets[i]), pl = (int)s->prompt_lengths[i];
        memcpy(p->tok + N, s->input_ids + start, (size_t)len * sizeof(int32_t));
        for (int t = 0; t < len; t++) p->tgt[N + t] = t + 1 < len && t + 1 >= pl ? s->input_ids[start + t + 1] : -1;
        for (int j = 0; j < len - pl; j++) p->pos[R + j] = N + pl + j - 1;
        N += len;
        R += len - pl;
        if (len > 0) p->cu[++packed] = N;
        p->r_off[k + 1] = R;
    }
    *c = (SeqChunk){ .seq = seq, .n = n, .R = R, .r_off = p->r_off, .logp = p->r_logp, .ent = p->r_ent,
                     .dlogp = p->r_dlogp, .dent = p->r_dent,
                     .b = { .n_tokens = N, .n_seqs = packed, .tokens = p->tok, .targets = p->tgt, .cu_seqlens = p->cu,
                            .temperature = temperature } };
}

/* Sequence i fits the scratch and its prompt length is 1..len (0 only when empty). */
static int check_seq(const SeqPack *p, const SeqSet *s, int i, char err[ERR_LEN]) {
    if (i < 0 || i >= s->n_seqs) return err_set(err, ERR_INVAL, "seqpack: sequence index %d outside [0, %d)", i, s->n_seqs);
    if (s->offsets[i + 1] < s->offsets[i])
        return err_set(err, ERR_INVAL, "seqpack: offsets[%d] = %u is below offsets[%d] = %u", i + 1, s->offsets[i + 1], i,
                       s->offsets[i]);
    uint32_t len = s->offsets[i + 1] - s->offsets[i], pl = s->prompt_lengths[i];
    if ((long)len > p->T)
        return err_set(err, ERR_TOO_BIG, "seqpack: sequence %d has %u tokens, more than the model's max_tokens %ld", i, len,
                       p->T);
    if (pl > len || (pl == 0 && len > 0))
        return err_set(err, ERR_INVAL, "seqpack: sequence %d has prompt length %u of %u tokens (need 1..len)", i, pl, len);
    return 0;
}

int seqpack_for_chunks(SeqPack *p, const SeqSet *s, const int *seq, int n, float temperature, SeqChunkFn fn,
                       void *ud, int *chunks, char err[ERR_LEN]) {
    for (int k = 0; k < n; k++) {
        int rc = check_seq(p, s, seq[k], err);
        if (rc) return rc;
    }
    if (n > p->cap_len) {
        p->len = xrealloc(p->len, (size_t)n * sizeof(long));
        p->cap_len = n;
    }
    for (int k = 0; k < n; k++) p->len[k] = (long)(s->offsets[seq[k] + 1] - s->offsets[seq[k]]);
    int a = 0, rc = 0;
    while (a < n && !rc) {
        int b = seqpack_chunk_end(p->len, a, n, p->T);
        long tok = 0;
        for (int k = a; k < b; k++) tok += p->len[k];
        if (tok > 0) {                                  /* a chunk of empty sequences only has nothing to run */
            SeqChunk c;
            pack(p, s, seq + a, b - a, temperature, &c);
            rc = fn(p, &c, ud, err);
            if (!rc && chunks) (*chunks)++;
        }
        a = b;
    }
    return rc;
}

int seqpack_forward(SeqPack *p, SeqChunk *c, int want_ent, char err[ERR_LEN]) {
    int rc = model_forward(p->m, &c->b, p->p_logp, want_ent ? p->p_ent : NULL, err);
    if (rc) return rc;
    for (int j = 0; j < c->R; j++) c->logp[j] = p->p_logp[p->pos[j]];
    if (want_ent)
        for (int j = 0; j < c->R; j++) c->ent[j] = p->p_ent[p->pos[j]];
    return 0;
}

int seqpack_backward(SeqPack *p, const SeqChunk *c, const float *dlogp, const float *dent, char err[ERR_LEN]) {
    size_t N = (size_t)c->b.n_tokens;
    memset(p->p_dlogp, 0, N * sizeof(float));
    if (dent) memset(p->p_dent, 0, N * sizeof(float));
    for (int j = 0; j < c->R; j++) {
        p->p_dlogp[p->pos[j]] = dlogp[j];
        if (dent) p->p_dent[p->pos[j]] = dent[j];
    }
    return model_backward(p->m, &c->b, p->p_dlogp, dent ? p->p_dent : NULL, err);
}
