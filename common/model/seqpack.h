/* common/model/seqpack.h: training over a set of prompt + response sequences, the one path of the learner and
 * dapo-sft. The sequences (a train batch's layout: verl's input_ids cut by offsets, each with its prompt length) are
 * cut into chunks that fit the model's activation slab (sequences in the caller's order, as many as fit; a longer
 * one is refused, see seqpack_for_chunks), each chunk packed back to back without padding into one
 * ModelBatch whose targets are the next token at every response position (-1 elsewhere: prompt tokens get no
 * log-prob and no gradient). Per chunk the caller's function runs seqpack_forward (log-probs and entropies of the
 * chunk's response tokens, gathered into response order) and, to train, seqpack_backward (d loss / d logp and
 * d entropy per response token, scattered back to the packed positions, then model_backward, which adds into the
 * gradient slab). What the loss is stays the caller's: the DAPO loss in the learner (dapo/loss.h), token-mean NLL in
 * dapo-sft.
 * Bitwise (CPU backend): model_forward / model_backward are sequence- and split-invariant there (model.h), so a
 * sequence's numbers do not depend on how the set was chunked; on CUDA (bf16, cuBLAS) nothing promises it.
 * Not here: micro-batching (dapo/layout.h), losses, optimizer steps, collectives. */
#ifndef DAPO_MODEL_SEQPACK_H
#define DAPO_MODEL_SEQPACK_H

#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

/* S sequences stored back to back; borrowed by every call. */
typedef struct {
    const int32_t  *input_ids;       /* [offsets[S]] token ids in [0, vocab) (callers check) */
    const uint32_t *offsets;         /* [S + 1] 0 = offsets[0] <= ... <= offsets[S] */
    const uint32_t *prompt_lengths;  /* [S] 1..len (0 only for an empty sequence); the response is the rest */
    int             n_seqs;          /* S */
} SeqSet;

/* One packed chunk, as the callback sees it. Arrays are the SeqPack's scratch (valid during the callback). */
typedef struct {
    const int  *seq;        /* [n] indices into the SeqSet of the chunk's sequences */
    int         n;          /* sequences in the chunk (>= 1) */
    int         R;          /* response tokens in the chunk */
    const int  *r_off;      /* [n + 1] response offsets: sequence k's response tokens are r_off[k] .. r_off[k+1]-1 */
    ModelBatch  b;          /* the packed batch (N = b.n_tokens tokens; empty sequences are not in it) */
    float      *logp, *ent; /* [R] after seqpack_forward: log-prob of each response token, entropy at its position */
    float      *dlogp, *dent; /* [R] scratch for the caller's loss gradients (seqpack_backward's inputs, if it likes) */
} SeqChunk;

typedef struct SeqPack SeqPack;

/* Scratch for chunks of up to model_max_tokens(m) tokens (a few arrays of that length, allocated once). m is
 * borrowed and must outlive the SeqPack. */
SeqPack *seqpack_new(Model *m);
void     seqpack_free(SeqPack *p);   /* NULL-safe */

/* The end of the chunk that starts at a: sequences a.. in order while their lengths len[] sum to <= max_tokens (a
 * longer one would go alone: seqpack_for_chunks refuses it first; empty ones ride along). a < end <= n; requires
 * a < n. */
int seqpack_chunk_end(const long *len, int a, int n, long max_tokens);

/* Calls fn once per chunk of the sequences seq[0..n) of s (in that order; chunks of only empty sequences are
 * skipped), the chunk packed at temperature (> 0, ModelBatch.temperature). Stops at fn's first nonzero return and
 * returns it. *chunks (may be NULL) counts the chunks run. Checked first (nothing runs then): every index in
 * [0, S), offsets increasing, each sequence at most model_max_tokens long (ERR_TOO_BIG) with a prompt length in
 * 1..len, 0 only for an empty one (ERR_INVAL); the token ids are model_forward's to check. */
typedef int (*SeqChunkFn)(SeqPack *p, SeqChunk *c, void *ud, char err[ERR_LEN]);
int seqpack_for_chunks(SeqPack *p, const SeqSet *s, const int *seq, int n, float temperature, SeqChunkFn fn,
                       void *ud, int *chunks, char err[ERR_LEN]);

/* model_forward over the chunk; fills c->logp[R] and, when want_ent, c->ent[R]. Errors: model_forward's. */
int seqpack_forward(SeqPack *p, SeqChunk *c, int want_ent, char err[ERR_LEN]);

/* model_backward of the last seqpack_forward (train-mode model): dlogp[R] = d loss / d logp of each response token,
 * dent[R] = d loss / d entropy or NULL (0). Adds into the model's gradients. Errors: model_backward's. */
int seqpack_backward(SeqPack *p, const SeqChunk *c, const float *dlogp, const float *dent, char err[ERR_LEN]);

#endif
