/* services/coordinator/tbwire.c: TrainBatch wire bytes written straight from per-sequence data (tbwire.h).
 * Encoding rules are protobuf's (developers.google.com/protocol-buffers/docs/encoding) as protobuf-c 1.4 applies
 * them to proto3 messages: a scalar is written only when non-zero, a string only when non-empty, a packed
 * repeated field only when it has elements; fields in field-number order. */
#include "tbwire.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum { WT_VARINT = 0, WT_LEN = 2 };

/* field numbers of TrainBatch (proto/dapo.proto) */
enum {
    F_RUN_ID = 1, F_STEP, F_POLICY_VERSION, F_MINI_BATCH_INDEX, F_NUM_MINI_BATCHES, F_PPO_EPOCH, F_INPUT_IDS,
    F_OFFSETS, F_PROMPT_LENGTHS, F_RESPONSE_MASK, F_ADVANTAGES, F_ROLLOUT_LOGPROBS, F_GROUP_IDS,
    F_GLOBAL_RESPONSE_TOKENS, F_GLOBAL_NUM_SEQS, F_RANK, F_WORLD_SIZE, F_LAST_OF_STEP, F_BEHAVIOUR_VERSIONS,
    F_TOTAL_TRAINING_STEPS, F_SCORES, F_TOKEN_VERSIONS
};

static inline size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

/* protobuf int32: non-negative as a varint, negative sign-extended to 64 bits (ten bytes) */
static inline size_t int32_len(int32_t v) {
    if (v < 0) return 10;
    /* 1 + floor(highest set bit / 7), branch-free: (idx * 9 + 73) / 64 equals it for idx 0..31 */
    return (size_t)(((31 - __builtin_clz((uint32_t)v | 1u)) * 9 + 73) >> 6);
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (uint8_t)(v | 0x80); v >>= 7; }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *put_int32(uint8_t *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    if (v >= 0 && u < 0x80) { *p++ = (uint8_t)u; return p; }
    return put_varint(p, (uint64_t)(int64_t)v);
}

static inline size_t tag_len(int field) { return varint_len((uint64_t)field << 3); }
static inline uint8_t *put_tag(uint8_t *p, int field, int wt) { return put_varint(p, (uint64_t)field << 3 | (uint64_t)wt); }

/* a varint scalar field: tag + value, nothing when zero */
static inline size_t scalar_len(int field, uint64_t v) { return v ? tag_len(field) + varint_len(v) : 0; }
static inline uint8_t *put_scalar(uint8_t *p, int field, uint64_t v) {
    return v ? put_varint(put_tag(p, field, WT_VARINT), v) : p;
}

/* a packed repeated field of payload bytes: tag + length + payload, nothing when it has no elements */
static inline size_t packed_len(int field, size_t count, size_t payload) {
    return count ? tag_len(field) + varint_len(payload) + payload : 0;
}

/* Encoded bytes of ids[0..n) as protobuf int32 varints: 1 + (v > 127) + (v > 16383) + (v > 2^21-1) +
 * (v > 2^28-1), or 10 for v < 0. Four at a time with SSE2 where the compiler has it (every x86-64). */
static size_t ids_len(const int32_t *ids, uint32_t n) {
    size_t total = 0;
    uint32_t k = 0;
#ifdef __SSE2__
    const __m128i t7 = _mm_set1_epi32(127), t14 = _mm_set1_epi32(16383), t21 = _mm_set1_epi32((1 << 21) - 1),
                  t28 = _mm_set1_epi32((1 << 28) - 1), nine = _mm_set1_epi32(9), zero = _mm_setzero_si128();
    while (n - k >= 4) {
        uint32_t end = n - k > (1u << 24) ? k + (1u << 24) : n;   /* lane sums stay far below 2^31 */
        __m128i acc = zero;
        for (; k + 4 <= end; k += 4) {
            __m128i v;
            memcpy(&v, ids + k, sizeof v);
            acc = _mm_sub_epi32(acc, _mm_cmpgt_epi32(v, t7));
            acc = _mm_sub_epi32(acc, _mm_cmpgt_epi32(v, t14));
            acc = _mm_sub_epi32(acc, _mm_cmpgt_epi32(v, t21));
            acc = _mm_sub_epi32(acc, _mm_cmpgt_epi32(v, t28));
            acc = _mm_add_epi32(acc, _mm_and_si128(_mm_cmplt_epi32(v, zero), nine));
        }
        int32_t lane[4];
        memcpy(lane, &acc, sizeof lane);
        total += (size_t)lane[0] + (size_t)lane[1] + (size_t)lane[2] + (size_t)lane[3];
    }
    total += k;                                   /* the 1 of every element counted so far */
#endif
    for (; k < n; k++) total += int32_len(ids[k]);
    return total;
}

static void sizes(const TbwSeq *seq, int n, TbwSizes *s) {
    memset(s, 0, sizeof *s);
    uint64_t t = 0;
    for (int i = 0; i < n; i++) s->has_tver |= seq[i].n_token_versions > 0;
    for (int i = 0; i < n; i++) {
        const TbwSeq *q = &seq[i];
        if (s->has_tver && q->n_token_versions)
            for (uint32_t k = 0; k < q->n_resp; k++) s->tver += varint_len((uint64_t)q->token_versions[k]);
        else if (s->has_tver)
            s->tver += (size_t)q->n_resp * varint_len((uint64_t)q->behaviour_version);
        s->ids += ids_len(q->prompt, q->n_prompt) + ids_len(q->resp, q->n_resp);
        s->offs += varint_len((uint32_t)t);
        t += (uint64_t)q->n_prompt + q->n_resp;
        s->plen += varint_len(q->n_prompt);
        s->gids += varint_len(q->group_id);
        s->bver += varint_len((uint64_t)q->behaviour_version);
        s->nresp += q->n_resp;
    }
    s->offs += varint_len((uint32_t)t);
    s->ntok = (size_t)t;
}

static size_t head_len(const TbwHead *h, int tail) {
    if (!tail) {
        size_t run = h->run_id ? strlen(h->run_id) : 0;
        return (run ? tag_len(F_RUN_ID) + varint_len(run) + run : 0) + scalar_len(F_STEP, (uint64_t)h->step) +
               scalar_len(F_POLICY_VERSION, (uint64_t)h->policy_version) +
               scalar_len(F_MINI_BATCH_INDEX, h->mini_batch_index) + scalar_len(F_NUM_MINI_BATCHES, h->num_mini_batches) +
               scalar_len(F_PPO_EPOCH, h->ppo_epoch);
    }
    return scalar_len(F_GLOBAL_RESPONSE_TOKENS, h->global_response_tokens) +
           scalar_len(F_GLOBAL_NUM_SEQS, h->global_num_seqs) + scalar_len(F_RANK, h->rank) +
           scalar_len(F_WORLD_SIZE, h->world_size) + scalar_len(F_LAST_OF_STEP, h->last_of_step ? 1 : 0);
}

static size_t total(const TbwHead *h, int n, const TbwSizes *s) {
    size_t ns = (size_t)(n > 0 ? n : 0);
    return head_len(h, 0) + packed_len(F_INPUT_IDS, s->ntok, s->ids) + packed_len(F_OFFSETS, ns + 1, s->offs) +
           packed_len(F_PROMPT_LENGTHS, ns, s->plen) + 3 * packed_len(F_RESPONSE_MASK, s->nresp, 4 * s->nresp) +
           packed_len(F_GROUP_IDS, ns, s->gids) + head_len(h, 1) + packed_len(F_BEHAVIOUR_VERSIONS, ns, s->bver) +
           scalar_len(F_TOTAL_TRAINING_STEPS, h->total_training_steps) + packed_len(F_SCORES, ns, 4 * ns) +
           (s->has_tver ? packed_len(F_TOKEN_VERSIONS, s->nresp, s->tver) : 0);
}

size_t tbwire_size(const TbwHead *h, const TbwSeq *seq, int n, TbwSizes *sz) {
    TbwSizes s;
    sizes(seq, n, &s);
    s.total = total(h, n, &s);
    if (sz) *sz = s;
    return s.total;
}

/* the per-response-token float field: one value per token (mask / advantages) or the log-probs */
static uint8_t *put_floats(uint8_t *p, int field, const TbwSeq *seq, int n, size_t nresp, int which) {
    if (!nresp) return p;
    p = put_varint(put_tag(p, field, WT_LEN), 4 * (uint64_t)nresp);
    for (int i = 0; i < n; i++) {
        const TbwSeq *q = &seq[i];
        if (which == 2) {
            uint32_t nl = q->n_logprobs < q->n_resp ? q->n_logprobs : q->n_resp;
            if (nl) memcpy(p, q->logprobs, (size_t)nl * 4);      /* logprobs may be NULL when empty */
            memset(p + (size_t)nl * 4, 0, (size_t)(q->n_resp - nl) * 4);   /* 0.0f is all-zero bytes */
        } else {                                       /* one value repeated: copied from a filled block */
            float v = which == 0 ? q->mask : q->adv, blk[64];
            uint32_t z = which == 0 ? (q->mask_prefix < q->n_resp ? q->mask_prefix : q->n_resp) : 0;
            memset(p, 0, (size_t)z * 4);                /* a masked prefix: 0.0f */
            for (int k = 0; k < 64; k++) blk[k] = v;
            for (uint32_t k = z; k < q->n_resp; k += 64)
                memcpy(p + (size_t)k * 4, blk, (size_t)(q->n_resp - k < 64 ? q->n_resp - k : 64) * 4);
        }
        p += (size_t)q->n_resp * 4;
    }
    return p;
}

size_t tbwire_write(const TbwHead *h, const TbwSeq *seq, int n, const TbwSizes *sz, uint8_t *out) {
    TbwSizes s;
    if (sz) s = *sz;
    else sizes(seq, n, &s);
    uint8_t *p = out;
    size_t run = h->run_id ? strlen(h->run_id) : 0;
    if (run) {
        p = put_varint(put_tag(p, F_RUN_ID, WT_LEN), run);
        memcpy(p, h->run_id, run);
        p += run;
    }
    p = put_scalar(p, F_STEP, (uint64_t)h->step);
    p = put_scalar(p, F_POLICY_VERSION, (uint64_t)h->policy_version);
    p = put_scalar(p, F_MINI_BATCH_INDEX, h->mini_batch_index);
    p = put_scalar(p, F_NUM_MINI_BATCHES, h->num_mini_batches);
    p = put_scalar(p, F_PPO_EPOCH, h->ppo_epoch);
    if (s.ntok) {
        p = put_varint(put_tag(p, F_INPUT_IDS, WT_LEN), s.ids);
        for (int i = 0; i < n; i++) {
            for (uint32_t k = 0; k < seq[i].n_prompt; k++) p = put_int32(p, seq[i].prompt[k]);
            for (uint32_t k = 0; k < seq[i].n_resp; k++) p = put_int32(p, seq[i].resp[k]);
        }
    }
    p = put_varint(put_tag(p, F_OFFSETS, WT_LEN), s.offs);        /* always n + 1 >= 1 elements */
    uint64_t t = 0;
    for (int i = 0; i < n; i++) {
        p = put_varint(p, (uint32_t)t);
        t += (uint64_t)seq[i].n_prompt + seq[i].n_resp;
    }
    p = put_varint(p, (uint32_t)t);
    if (n > 0) {
        p = put_varint(put_tag(p, F_PROMPT_LENGTHS, WT_LEN), s.plen);
        for (int i = 0; i < n; i++) p = put_varint(p, seq[i].n_prompt);
    }
    p = put_floats(p, F_RESPONSE_MASK, seq, n, s.nresp, 0);
    p = put_floats(p, F_ADVANTAGES, seq, n, s.nresp, 1);
    p = put_floats(p, F_ROLLOUT_LOGPROBS, seq, n, s.nresp, 2);
    if (n > 0) {
        p = put_varint(put_tag(p, F_GROUP_IDS, WT_LEN), s.gids);
        for (int i = 0; i < n; i++) p = put_varint(p, seq[i].group_id);
    }
    p = put_scalar(p, F_GLOBAL_RESPONSE_TOKENS, h->global_response_tokens);
    p = put_scalar(p, F_GLOBAL_NUM_SEQS, h->global_num_seqs);
    p = put_scalar(p, F_RANK, h->rank);
    p = put_scalar(p, F_WORLD_SIZE, h->world_size);
    p = put_scalar(p, F_LAST_OF_STEP, h->last_of_step ? 1 : 0);
    if (n > 0) {
        p = put_varint(put_tag(p, F_BEHAVIOUR_VERSIONS, WT_LEN), s.bver);
        for (int i = 0; i < n; i++) p = put_varint(p, (uint64_t)seq[i].behaviour_version);
    }
    p = put_scalar(p, F_TOTAL_TRAINING_STEPS, h->total_training_steps);
    if (n > 0) {
        p = put_varint(put_tag(p, F_SCORES, WT_LEN), 4 * (uint64_t)n);
        for (int i = 0; i < n; i++, p += 4) memcpy(p, &seq[i].score, 4);
    }
    if (s.has_tver && s.nresp) {
        p = put_varint(put_tag(p, F_TOKEN_VERSIONS, WT_LEN), s.tver);
        for (int i = 0; i < n; i++)
            for (uint32_t k = 0; k < seq[i].n_resp; k++)
                p = put_varint(p, (uint64_t)(seq[i].n_token_versions ? seq[i].token_versions[k]
                                                                     : seq[i].behaviour_version));
    }
    return (size_t)(p - out);
}
