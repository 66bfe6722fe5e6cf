/* tests/integration/longtest_chaos.c: test_chaos.c's long version for make check-long: 30 seeded faults (the seven
 * kinds in turn, then drawn at random) over 200 steps, the same checks at the end. */
#define CHAOS_DEFAULT_STEPS 200
#define CHAOS_DEFAULT_FAULTS 30
#include "test_chaos.c"
