/* services/coordinator/tbwire.h: the protobuf wire bytes of one TrainBatch (proto/dapo.proto), written straight
 * from the coordinator's per-sequence data into the send buffer, without first copying every token into the
 * repeated-field arrays of a Dapo__TrainBatch and letting protobuf-c walk them twice (size, then pack). The bytes
 * are exactly those of protobuf_c_message_pack on the equivalent Dapo__TrainBatch (proto3: zero scalars and empty
 * strings / repeated fields left out, fields in number order, packed repeated fields, int32 < 0 as ten-byte
 * varints); tests/unit/test_coord_tbwire.c checks that byte for byte against protobuf-c.
 * Little-endian hosts only (floats are copied as they lie in memory, as protobuf-c does there).
 * Not here: the batch plan (batch.h: layout, advantages, the rows), the frame header
 * (net_encode_into) and the send (out_zc_frame, out_zc_send). */
#ifndef DAPO_COORD_TBWIRE_H
#define DAPO_COORD_TBWIRE_H

#include <stddef.h>
#include <stdint.h>

/* One sequence of the shard, in order. Borrowed pointers; n_logprobs may be below n_resp (the rest is sent as
 * 0.0, as send_batch always did). */
typedef struct {
    const int32_t *prompt;      /* [n_prompt] prompt token ids */
    uint32_t       n_prompt;
    const int32_t *resp;        /* [n_resp] response token ids */
    uint32_t       n_resp;
    const float   *logprobs;    /* [n_logprobs] rollout log-probs of the response tokens */
    uint32_t       n_logprobs;
    float          mask;        /* response_mask value of every response token (0 or 1) ... */
    uint32_t       mask_prefix; /* ... but the first mask_prefix, which get 0 (rollout.mask_offpolicy_in_partial_rollout) */
    float          adv;         /* advantages value of every response token */
    float          score;       /* the reward the advantage came from (TrainBatch.scores) */
    uint64_t       group_id;
    int64_t        behaviour_version;   /* the policy version that generated it (>= 0; partial rollouts: its oldest) */
    const int64_t *token_versions;      /* [n_token_versions = n_resp, or 0] each response token's version, given
                                           only when they differ (partial rollouts): TrainBatch.token_versions is
                                           sent when some sequence of the shard has them */
    uint32_t       n_token_versions;
} TbwSeq;

/* The TrainBatch scalars (fields 1-6, 14-18, 20). run_id borrowed, NUL-terminated (NULL or "": left out). */
typedef struct {
    const char *run_id;
    int64_t     step, policy_version;
    uint32_t    mini_batch_index, num_mini_batches, ppo_epoch;
    uint64_t    global_response_tokens;
    uint32_t    global_num_seqs, rank, world_size;
    int         last_of_step;
    uint64_t    total_training_steps;
} TbwHead;

/* Field sizes found by tbwire_size, handed to tbwire_write so the token ids are walked once for their size. */
typedef struct {
    size_t ids, offs, plen, gids, bver, tver; /* payload bytes of the varint repeated fields */
    int    has_tver;                    /* some sequence has token_versions: the field goes out for every token */
    size_t ntok, nresp;                 /* tokens, response tokens */
    size_t total;                       /* packed message bytes */
} TbwSizes;

/* Packed size in bytes of the TrainBatch of (h, seq[0..n)) — what protobuf_c_message_get_packed_size returns
 * for it. input_ids = prompt ++ response per sequence, offsets = running token starts (n + 1 of them, as
 * uint32), prompt_lengths = n_prompt, response_mask / advantages / rollout_logprobs per response token, group_ids
 * and behaviour_versions per sequence. Fills *sz (may be NULL) for tbwire_write. */
size_t tbwire_size(const TbwHead *h, const TbwSeq *seq, int n, TbwSizes *sz);

/* Writes those bytes to out (sz->total of them, caller-owned) and returns the count written. sz: from
 * tbwire_size on the same (h, seq, n), or NULL to compute it again. */
size_t tbwire_write(const TbwHead *h, const TbwSeq *seq, int n, const TbwSizes *sz, uint8_t *out);

#endif
