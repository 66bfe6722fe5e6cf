/* common/io/safetensors.h: read and write Hugging Face safetensors files
 * (format: https://github.com/huggingface/safetensors, "8-byte little-endian header length, JSON header,
 * raw little-endian tensor bytes").
 *
 * Reading mmaps each file read-only, parses the header with jansson and converts on demand
 * F32 / BF16 / F16 -> fp32 (and I32 / I64 -> int32 for fixture files). A directory is read as
 * `model.safetensors`, or as the shards listed in `model.safetensors.index.json` (its "weight_map").
 * Writing produces one file, dtype F32 or BF16 (round-to-nearest-even), loadable by transformers.
 * Not here: sharded writing, F64/F8 dtypes, the model's tensor names (model/model.c). */
#ifndef DAPO_SAFETENSORS_H
#define DAPO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef enum { ST_F32 = 0, ST_BF16, ST_F16, ST_I32, ST_I64, ST_F64 } StDtype;

#define ST_MAX_DIMS 8

typedef struct {
    char       *name;                /* owned */
    StDtype     dtype;
    int         ndim;
    int64_t     shape[ST_MAX_DIMS];
    int64_t     numel;               /* product of shape (1 for a scalar) */
    const void *data;                /* borrowed: points into the mmap; valid until st_close() */
    size_t      nbytes;
} StTensor;

typedef struct SafeTensors SafeTensors;   /* opaque */

/* Opens a .safetensors file, or a directory holding model.safetensors or model.safetensors.index.json
 * with its shards. Every header is validated (offsets inside the file, sizes = numel x dtype size, known
 * dtypes) before returning. Caller frees with st_close(). NULL on error, reason in err
 * (ERR_IO, ERR_DECODE, ERR_UNSUPPORTED, ERR_NOTFOUND). */
SafeTensors *st_open(const char *path, char err[ERR_LEN]);
void st_close(SafeTensors *st);                 /* NULL-safe; unmaps */

int st_count(const SafeTensors *st);
/* i in [0, st_count); borrowed, valid until st_close. */
const StTensor *st_get(const SafeTensors *st, int i);
/* Lookup by exact name; NULL when absent. */
const StTensor *st_find(const SafeTensors *st, const char *name);
/* The "__metadata__" string value for key (borrowed), or NULL. Metadata of the first file only. */
const char *st_metadata(const SafeTensors *st, const char *key);

/* Copies tensor `name` as fp32 into dst (n floats; must equal numel). ERR_NOTFOUND names the tensor,
 * ERR_INVAL names the size mismatch, ERR_UNSUPPORTED for integer tensors. */
int st_read_f32(const SafeTensors *st, const char *name, float *dst, size_t n, char err[ERR_LEN]);
/* Copies elements [first, first + n) of tensor `name` (flat, row-major) as fp32 into dst[n]: a rank's piece of a
 * tensor without reading the rest (services/learner/shard.h). ERR_NOTFOUND, ERR_INVAL (the range is outside the
 * tensor), ERR_UNSUPPORTED (integer tensors). */
int st_read_f32_range(const SafeTensors *st, const char *name, size_t first, size_t n, float *dst, char err[ERR_LEN]);
/* Copies an integer (I32/I64) tensor into dst as int32 (n elements = numel). */
int st_read_i32(const SafeTensors *st, const char *name, int32_t *dst, size_t n, char err[ERR_LEN]);

/* One tensor to write: fp32 source data, written as `dtype` (ST_F32 or ST_BF16) or, with
 * i32 != NULL, as ST_I32. shape/ndim as in StTensor. */
typedef struct {
    const char    *name;
    int            ndim;
    int64_t        shape[ST_MAX_DIMS];
    const float   *f32;
    const int32_t *i32;
} StWriteTensor;

/* Writes tensors to path (temp file + fsync + rename). dtype: ST_F32 or ST_BF16 for the float tensors.
 * meta: NULL or n_meta (key, value) string pairs for "__metadata__" (transformers wants
 * {"format": "pt"}, added when absent). Tensors are laid out in the given order, 8-byte aligned header.
 * Errors: ERR_INVAL (bad dtype/shape), ERR_IO with errno text. */
int st_write(const char *path, const StWriteTensor *t, int n, StDtype dtype, const char *const *meta,
             int n_meta, char err[ERR_LEN]);

/* Element converters (exposed for tests and the CUDA upload path). */

#endif
