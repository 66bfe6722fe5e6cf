/* tests/unit/test_wchunk.c: the weight-chunk protocol's shared rules (common/net/wchunk.h): piece counts at the
 * 4 MiB boundary, dtype sizes, the model-free checks of a received chunk (bounds, a changed count, a corrupted
 * byte), and little-endian F32 / BF16 / F16 decoding against hand-written bit patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "net/wchunk.h"

static void test_pieces_and_dtypes(void **state) {
    (void)state;
    assert_int_equal(wchunk_pieces(0), 1);
    assert_int_equal(wchunk_pieces(WCHUNK_BYTES), 1);
    assert_int_equal(wchunk_pieces((uint64_t)WCHUNK_BYTES + 1), 2);
    assert_int_equal(wchunk_pieces(3ull * WCHUNK_BYTES), 3);
    assert_int_equal(wchunk_dtype_size("F32"), 4);
    assert_int_equal(wchunk_dtype_size("BF16"), 2);
    assert_int_equal(wchunk_dtype_size("F16"), 2);
    assert_int_equal(wchunk_dtype_size("F64"), 0);
    assert_int_equal(wchunk_dtype_size(NULL), 0);
}

static void test_check(void **state) {
    (void)state;
    uint8_t data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    Dapo__WeightUpdate u = DAPO__WEIGHT_UPDATE__INIT;
    u.tensor_name = "model.norm.weight";
    u.chunk_index = 1;
    u.chunk_count = 3;
    u.data.data = data;
    u.data.len = sizeof data;
    u.checksum = wchunk_checksum(data, sizeof data);
    char err[ERR_LEN];
    assert_int_equal(wchunk_check(&u, 0, err), 0);
    assert_int_equal(wchunk_check(&u, 3, err), 0);
    assert_int_equal(wchunk_check(&u, 4, err), ERR_INVAL);          /* the version's count changed */
    u.chunk_index = 3;
    assert_int_equal(wchunk_check(&u, 0, err), ERR_INVAL);          /* index past the count */
    u.chunk_index = 0;
    u.chunk_count = 0;
    assert_int_equal(wchunk_check(&u, 0, err), ERR_INVAL);
    u.chunk_count = 3;
    data[5] ^= 1;                                                    /* one flipped bit */
    assert_int_equal(wchunk_check(&u, 0, err), ERR_DECODE);
    assert_non_null(strstr(err, "checksum"));
}

static void test_decode(void **state) {
    (void)state;
    float out[2];
    const uint8_t f32[8] = { 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0 };   /* 1.0, -2.0 */
    wchunk_decode(out, f32, 2, "F32");
    assert_true(out[0] == 1.0f && out[1] == -2.0f);
    const uint8_t bf16[4] = { 0x80, 0x3f, 0x40, 0xc0 };                          /* 1.0, -3.0 */
    wchunk_decode(out, bf16, 2, "BF16");
    assert_true(out[0] == 1.0f && out[1] == -3.0f);
    const uint8_t f16[4] = { 0x00, 0x3c, 0x00, 0xc0 };                           /* 1.0, -2.0 */
    wchunk_decode(out, f16, 2, "F16");
    assert_true(out[0] == 1.0f && out[1] == -2.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_and_dtypes),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
