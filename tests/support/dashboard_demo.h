/* tests/support/dashboard_demo.h: N synthetic steps of metrics and samples on a real coordinator's dashboard, one every
 * 200 ms, each with `demo/synthetic: 1` — for the dashboard tests (test_dashboard, longtest_dashboard_browser),
 * through coord_run's hooks (tests/support/bin/dapo-coordinator-demo.c: dapo-coordinator plus --demo-steps N).
 * Test support only: never linked into a daemon. */
#ifndef DAPO_DASHBOARD_DEMO_H
#define DAPO_DASHBOARD_DEMO_H

#include "services/coordinator/coord.h"

/* A CoordHooks.after_listen: ud points at the int step count (<= 0: nothing). 0, or ERR_IO with err set. */
int dashboard_demo_start(Coord *c, void *ud, char err[ERR_LEN]);

#endif
