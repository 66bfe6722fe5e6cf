/* common/dapo/overlong.c: overlong penalty and overlong filtering (overlong.h; verl DAPORewardManager).
 * Not here: anything stateful; these are plain functions of their arguments. */
#include "dapo/overlong.h"

#include <math.h>
#include <string.h>

int overlong_penalty(int64_t response_len, int64_t max_response_len, int64_t buffer_len, double factor,
                     float *penalty, char err[ERR_LEN]) {
    if (!penalty) return err_set(err, ERR_INVAL, "overlong_penalty: NULL output");
    *penalty = 0.0f;
    if (buffer_len <= 0)
        return err_set(err, ERR_INVAL, "reward_model.overlong_buffer.len must be positive when the overlong "
                                       "penalty is enabled, got %lld", (long long)buffer_len);
    if (max_response_len <= 0)
        return err_set(err, ERR_INVAL, "data.max_response_length must be positive, got %lld",
                       (long long)max_response_len);
    if (buffer_len > max_response_len)
        return err_set(err, ERR_INVAL, "reward_model.overlong_buffer.len (%lld) must not exceed "
                                       "data.max_response_length (%lld)", (long long)buffer_len,
                       (long long)max_response_len);
    if (response_len < 0) return err_set(err, ERR_INVAL, "response length %lld < 0", (long long)response_len);
    if (!isfinite(factor) || factor < 0)
        return err_set(err, ERR_INVAL, "reward_model.overlong_buffer.penalty_factor must be finite and >= 0, "
                                       "got %g", factor);
    int64_t expected = max_response_len - buffer_len;
    int64_t exceed = response_len - expected;
    /* torch: (-exceed_len).true_divide(B) in float32, then * factor in float32 */
    volatile float q = (float)(-exceed) / (float)buffer_len;   /* volatile: no fused multiply-add */
    float p = q * (float)factor;
    *penalty = p < 0.0f ? p : 0.0f;   /* min(x, 0): x when x < 0, else the int 0 */
    return 0;
}

bool overlong_filter_masked(bool enabled, const char *finish_reason) {
    return enabled && finish_reason && strcmp(finish_reason, "length") == 0;
}

size_t overlong_filter_apply(bool enabled, const char *finish_reason, float *mask, size_t n) {
    if (!mask || !overlong_filter_masked(enabled, finish_reason)) return 0;
    size_t zeroed = 0;
    for (size_t i = 0; i < n; i++) {
        zeroed += mask[i] != 0.0f;
        mask[i] = 0.0f;
    }
    return zeroed;
}
