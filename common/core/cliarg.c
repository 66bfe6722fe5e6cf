/* common/core/cliarg.c: numeric command-line flags (cliarg.h). */
#include "core/cliarg.h"

#include <errno.h>
#include <stdlib.h>

int cli_number(const char *flag, const char *v, double lo, double hi, double *out, char err[ERR_LEN]) {
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !(d >= lo && d <= hi))
        return err_set(err, ERR_INVAL, "%s: '%s' is not a number in [%g, %g]", flag, v, lo, hi);
    *out = d;
    return 0;
}
