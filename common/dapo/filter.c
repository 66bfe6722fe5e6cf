/* common/dapo/filter.c: the dynamic-sampling group filter and solve counts (semantics and source in filter.h).
 * Not here: anything stateful about generation rounds (services/coordinator). */
#include "dapo/filter.h"

#include <math.h>
#include <string.h>

static const char *const k_metric_names[] = { "acc", "score", "seq_reward", "seq_final_reward" };
#define N_METRICS ((int)(sizeof k_metric_names / sizeof k_metric_names[0]))

int filter_metric_parse(const char *name, FilterMetric *metric, char err[ERR_LEN]) {
    for (int i = 0; name && i < N_METRICS; i++)
        if (strcmp(name, k_metric_names[i]) == 0) { *metric = (FilterMetric)i; return 0; }
    return err_set(err, ERR_INVAL, "filter_groups.metric '%s': expected acc, score, seq_reward or "
                   "seq_final_reward", name ? name : "(null)");
}

const char *filter_metric_name(FilterMetric metric) {
    return (int)metric >= 0 && (int)metric < N_METRICS ? k_metric_names[metric] : "?";
}

double filter_metric_value(FilterMetric metric, double score, double acc, double penalty) {
    switch (metric) {
    case FILTER_METRIC_ACC: return acc;
    case FILTER_METRIC_SCORE: return score;
    default: return score + penalty;
    }
}

static int check_groups(const void *v, const int *group_size, int n_groups, const void *out, char err[ERR_LEN]) {
    if (n_groups < 0 || (n_groups > 0 && (!v || !group_size || !out)))
        return err_set(err, ERR_INVAL, "filter: bad arguments (n_groups %d)", n_groups);
    for (int g = 0; g < n_groups; g++)
        if (group_size[g] < 1) return err_set(err, ERR_INVAL, "filter: group %d has size %d", g, group_size[g]);
    return 0;
}

int filter_groups(const double *value, const int *group_size, int n_groups, uint8_t *keep, FilterStats *st,
                  char err[ERR_LEN]) {
    int rc = check_groups(value, group_size, n_groups, keep, err);
    if (rc) return rc;
    FilterStats s = { n_groups, 0, 0 };
    int off = 0;
    for (int g = 0; g < n_groups; g++) {
        const int n = group_size[g];
        const double *v = value + off;
        int differ = 0, has_nan = 0;
        for (int i = 0; i < n; i++) {
            has_nan |= isnan(v[i]);
            differ |= v[i] != v[0];
        }
        keep[g] = (uint8_t)(n == 1 || (differ && !has_nan));
        s.n_kept += keep[g];
        off += n;
    }
    s.n_filtered = s.n_groups - s.n_kept;
    if (st) *st = s;
    return 0;
}

int filter_solve_counts(const double *acc, const int *group_size, int n_groups, int *solve_none,
                        int *solve_all, char err[ERR_LEN]) {
    int rc = check_groups(acc, group_size, n_groups, solve_none, err);
    if (rc) return rc;
    if (!solve_all) return err_set(err, ERR_INVAL, "filter_solve_counts: NULL solve_all");
    int none = 0, all = 0, off = 0;
    for (int g = 0; g < n_groups; g++) {
        int n = group_size[g], all_wrong = 1, all_right = 1;
        for (int i = 0; i < n; i++) {
            all_wrong &= acc[off + i] <= 0.0;
            all_right &= acc[off + i] >= 1.0;
        }
        none += all_wrong;
        all += all_right;
        off += n;
    }
    *solve_none = none;
    *solve_all = all;
    return 0;
}
