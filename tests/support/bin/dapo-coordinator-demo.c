/* tests/support/bin/dapo-coordinator-demo.c: dapo-coordinator (coord_run) with the dashboard tests' synthetic steps:
 *   dapo-coordinator-demo --demo-steps N [every dapo-coordinator argument]
 * Built by `make test-build` into $(BUILD)/tests/; never installed. */
#include <stdlib.h>
#include <string.h>

#include "tests/support/dashboard_demo.h"

int main(int argc, char **argv) {
    static int steps = 0;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--demo-steps")) { steps = atoi(argv[++i]); continue; }
        argv[n++] = argv[i];
    }
    argv[n] = NULL;
    CoordHooks h = { .after_listen = dashboard_demo_start, .ud = &steps };
    return coord_run(n, argv, &h);
}
