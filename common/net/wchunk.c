/* common/net/wchunk.c: the weight-chunk protocol's shared rules (wchunk.h). */
#include "net/wchunk.h"

#include <string.h>
#include <xxhash.h>

#include "core/dtype.h"

uint64_t wchunk_checksum(const void *data, size_t len) { return XXH64(data, len, 0); }

uint32_t wchunk_pieces(uint64_t bytes) { return bytes ? (uint32_t)((bytes + WCHUNK_BYTES - 1) / WCHUNK_BYTES) : 1; }

size_t wchunk_dtype_size(const char *dtype) {
    if (!dtype) return 0;
    if (!strcmp(dtype, "F32")) return 4;
    return !strcmp(dtype, "BF16") || !strcmp(dtype, "F16") ? 2 : 0;
}

int wchunk_check(const Dapo__WeightUpdate *u, uint32_t known_count, char err[ERR_LEN]) {
    if (u->chunk_count == 0 || u->chunk_count > WCHUNK_MAX_COUNT || u->chunk_index >= u->chunk_count)
        return err_set(err, ERR_INVAL, "chunk %u of %u: bad chunk index/count", u->chunk_index, u->chunk_count);
    if (known_count && u->chunk_count != known_count)
        return err_set(err, ERR_INVAL, "chunk count %u differs from the %u seen before", u->chunk_count, known_count);
    if (wchunk_checksum(u->data.data, u->data.len) != u->checksum)
        return err_set(err, ERR_DECODE, "chunk %u (%s): checksum mismatch", u->chunk_index, u->tensor_name);
    return 0;
}

void wchunk_decode(float *dst, const uint8_t *src, size_t n, const char *dtype) {
    size_t es = wchunk_dtype_size(dtype);
    if (es == 4) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        dst[i] = dtype[0] == 'B' ? dtype_bf16_to_f32(h) : dtype_f16_to_f32(h);
    }
}
