/* services/coordinator/main.c: dapo-coordinator (its body is coord_run, run.c). */
#include "coord.h"

int main(int argc, char **argv) { return coord_run(argc, argv, NULL); }
