/* common/net/wchunk.h: the weight-chunk protocol between learner rank 0 (services/learner/weights.h, the server) and
 * the rollouts (services/rollout/weights.h, the fetchers), described once. Transport: the learner's ROUTER at
 * cluster.weights_bind, a rollout's DEALER connected to cluster.weights.
 *   rollout -> learner  WeightResend{version, chunk_indices ([] = all, or the missing ones), worker_id}
 *   learner -> rollout  WeightUpdate{run_id, version, chunk_index, chunk_count, tensor_name (HF), dtype, shape,
 *                        offset (bytes into the tensor), data, checksum, total_bytes (all chunks)}
 *   chunks:   every tensor of the model in its Hugging Face tensor order (a tied lm_head is not sent), each cut into
 *             pieces of at most WCHUNK_BYTES; chunk_index counts over all tensors, chunk_count is the total (at
 *             most WCHUNK_MAX_COUNT);
 *   dtype:    "F32" (what the learner sends), "BF16" or "F16", little-endian;
 *   checksum: XXH64(data, seed 0) (wchunk_checksum).
 * The server answers a request for the version it holds, or an older one, with the version it holds; a version it
 * does not have yet gets no answer. Version 0 is the initial model.
 * Not here: the server (learner) and the staging/acceptance against a model (rollout). */
#ifndef DAPO_NET_WCHUNK_H
#define DAPO_NET_WCHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "dapo.pb-c.h"

#define WCHUNK_BYTES     (4u << 20)   /* largest chunk payload */
#define WCHUNK_MAX_COUNT (1u << 24)   /* chunks in one version, at most */

uint64_t wchunk_checksum(const void *data, size_t len);
/* Chunks of a tensor of `bytes` bytes (an empty tensor is still one chunk). */
uint32_t wchunk_pieces(uint64_t bytes);
/* Bytes per element of a chunk dtype: 4 for F32, 2 for BF16 and F16, 0 for anything else. */
size_t   wchunk_dtype_size(const char *dtype);
/* The checks of a received chunk that need no model: chunk_count in [1, WCHUNK_MAX_COUNT], chunk_index below it, the
 * same count as the version's earlier chunks (known_count; 0: none seen yet), the checksum. 0, or ERR_INVAL /
 * ERR_DECODE naming the chunk. */
int      wchunk_check(const Dapo__WeightUpdate *u, uint32_t known_count, char err[ERR_LEN]);
/* n elements of a chunk's data (dtype F32 / BF16 / F16, little-endian) as fp32 into dst. */
void     wchunk_decode(float *dst, const uint8_t *src, size_t n, const char *dtype);

#endif
