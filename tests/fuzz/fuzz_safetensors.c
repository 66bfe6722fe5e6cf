/* tests/fuzz/fuzz_safetensors.c: libFuzzer target for the safetensors reader (common/io/safetensors.c) on
 * arbitrary file bytes: header length, JSON header, dtypes, shapes, offsets. A file that opens must have
 * every tensor inside the mapping with nbytes = numel x dtype size, and reading each one must not crash.
 * Not here: model-level checks (tests/unit/test_model.c). */
// fuzz-sources: common/io/safetensors.c common/core/dtype.c common/core/err.c common/core/log.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("st", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) { close(fd); return 0; }
    char path[64], err[ERR_LEN];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    SafeTensors *st = st_open(path, err);
    if (st) {
        for (int i = 0; i < st_count(st); i++) {
            const StTensor *t = st_get(st, i);
            if (t->numel > (1 << 20)) continue;
            if (t->dtype == ST_I32 || t->dtype == ST_I64) {
                int32_t *b = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(int32_t));
                (void)st_read_i32(st, t->name, b, (size_t)t->numel, err);
                free(b);
            } else {
                float *b = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
                if (st_read_f32(st, t->name, b, (size_t)t->numel, err) != 0) abort();   /* valid float tensor */
                free(b);
            }
        }
        (void)st_metadata(st, "format");
        st_close(st);
    }
    close(fd);
    return 0;
}
