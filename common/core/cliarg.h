/* common/core/cliarg.h: the numeric command-line flags of the tools (dapo-generate, dapo-eval, dapo-sft), parsed and
 * refused one way: "<flag>: '<value>' is not a number in [lo, hi]".
 * Not here: the config table's keys (core/config.h), which have their own types and messages. */
#ifndef DAPO_CLIARG_H
#define DAPO_CLIARG_H

#include "core/err.h"

/* v as a number in [lo, hi] (strtod, the whole string, no range error) into *out; 0, or ERR_INVAL naming flag and
 * value in err. */
int cli_number(const char *flag, const char *v, double lo, double hi, double *out, char err[ERR_LEN]);

#endif
