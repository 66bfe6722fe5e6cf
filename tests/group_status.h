/* tests/group_status.h: the coordinator's group accounting as /api/status reports it ("groups": a count per
 * GroupState and "created"), read and checked the same way by every cluster test. Header-only, for cmocka tests
 * (include after <cmocka.h> and <jansson.h>). */
#ifndef DAPO_TESTS_GROUP_STATUS_H
#define DAPO_TESTS_GROUP_STATUS_H

static inline json_int_t tu_group_count(json_t *st, const char *state) {
    return json_integer_value(json_object_get(json_object_get(st, "groups"), state));
}

/* Every group is in exactly one state: the states add up to "created" (docs/design.md §7). settled: also none is in
 * flight (queued, leased, generated, scoring or kept), as at the end of a run. */
static inline void tu_assert_groups_add_up(json_t *st, int settled) {
    static const char *const states[] = {"queued", "leased", "generated", "scoring", "kept", "filtered", "surplus",
                                         "cancelled", "trained", "validated", "stale", "held"};
    json_int_t sum = 0;
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) sum += tu_group_count(st, states[i]);
    assert_int_equal(sum, tu_group_count(st, "created"));
    if (settled) {
        for (int i = 0; i < 5; i++) assert_int_equal(tu_group_count(st, states[i]), 0);
        assert_int_equal(tu_group_count(st, "held"), 0);
    }
}

#endif
