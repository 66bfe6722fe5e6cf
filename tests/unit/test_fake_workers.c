/* tests/unit/test_fake_workers.c: the scripted rollout's bench-only fast path (tests/fake_workers.h,
 * FakeRollout.fast): the GroupResult frame it builds from a per-class template equals, byte for byte, the frame
 * net_encode makes of the GroupResult the script packs with protobuf-c (the tests' path), for every answer class,
 * group sizes that change between calls (the template is rebuilt), head fields of every varint width (zero fields
 * omitted, a negative policy version), and the frame decodes back to the request's head and n responses.
 * Not here: the workers' threads and the coordinator (tests/integration/test_coordinator.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "tests/fake_workers.h"

static void check_one(FakeRollout *f, const char *run_id, int64_t step, int64_t version, uint64_t gid, uint32_t attempt,
                      int n_prompt, uint32_t n) {
    int32_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    Dapo__GenerateGroup g = DAPO__GENERATE_GROUP__INIT;
    g.run_id = (char *)run_id;
    g.step = step;
    g.policy_version = version;
    g.group_id = gid;
    g.attempt = attempt;
    g.prompt_token_ids = prompt;
    g.n_prompt_token_ids = (size_t)n_prompt;
    g.n = n;
    /* the reference: the message the script packs, framed by net_encode */
    Dapo__Response resp[64], *rp[64];
    Dapo__GroupResult r;
    f->loaded = version;                                  /* the version the rollout holds is what it stamps */
    fake_group_result(f, &g, resp, rp, &r);
    size_t ref_len = 0;
    uint8_t *ref = net_encode(DAPO__MSG_TYPE__MSG_GROUP_RESULT, &r.base, &ref_len);
    assert_non_null(ref);
    zmq_msg_t m;
    size_t len = fake_group_frame(f, &g, &m);
    assert_int_equal(len, ref_len);
    assert_int_equal(zmq_msg_size(&m), ref_len);
    assert_memory_equal(zmq_msg_data(&m), ref, ref_len);
    /* and it decodes to this group's result */
    Dapo__MsgType type;
    uint16_t ver;
    ProtobufCMessage *msg = NULL;
    char err[ERR_LEN];
    assert_int_equal(net_decode(zmq_msg_data(&m), len, 0, &type, &ver, &msg, err), 0);
    assert_int_equal(type, DAPO__MSG_TYPE__MSG_GROUP_RESULT);
    Dapo__GroupResult *d = (Dapo__GroupResult *)msg;
    assert_string_equal(d->run_id, run_id);
    assert_true(d->step == step && d->policy_version == version && d->group_id == gid && d->attempt == attempt);
    assert_int_equal(d->n_responses, n);
    for (size_t i = 0; i < d->n_responses; i++) {
        assert_int_equal(d->responses[i]->n_token_ids, (size_t)f->resp_tokens);
        assert_int_equal(d->responses[i]->n_logprobs, (size_t)f->resp_tokens);
        assert_int_equal(d->responses[i]->text.len, (size_t)f->text_bytes);
        assert_string_equal(d->responses[i]->finish_reason, "stop");
    }
    if (n == 8 && n_prompt % 3 == 1)                      /* mixed class: even responses right, odd ones wrong */
        assert_true(!memcmp(d->responses[0]->text.data, "Answer: 7", 9) && !memcmp(d->responses[1]->text.data, "Answer: 8", 9));
    protobuf_c_message_free_unpacked(msg, NULL);
    zmq_msg_close(&m);
    xfree(ref);
}

static void test_fast_frame_equals_protobuf(void **state) {
    (void)state;
    FakeRollout f;
    memset(&f, 0, sizeof f);
    f.fast = 1;
    f.resp_tokens = 256;
    f.text_bytes = 1024;
    for (int np = 3; np <= 5; np++) {                           /* the three answer classes */
        check_one(&f, "run-1796032376-26665", 1, 0, 7, 0, np, 8);
        check_one(&f, "run-1796032376-26665", 300, 299, 1ull << 40, 3, np, 8);
        check_one(&f, "r", 0, -1, 0, 0, np, 8);                 /* zero head fields are not on the wire */
        check_one(&f, "", 2, 5, 127, 1, np, 4);                 /* another n: the template is rebuilt */
        check_one(&f, "run-x", 2, 5, 128, 1, np, 8);
    }
    for (int k = 0; k < 3; k++) xfree(f.tmpl[k].body);
}

static void test_fast_frame_short_responses(void **state) {
    (void)state;
    FakeRollout f;
    memset(&f, 0, sizeof f);
    f.fast = 1;
    f.mode = MODE_ALL_WRONG;
    f.resp_tokens = 1;
    f.text_bytes = 9;                                           /* just the answer line */
    check_one(&f, "run", 1, 1, 42, 0, 4, 2);
    check_one(&f, "run", 1, 1, 43, 0, 5, 1);
    for (int k = 0; k < 3; k++) xfree(f.tmpl[k].body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_frame_equals_protobuf),
        cmocka_unit_test(test_fast_frame_short_responses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
