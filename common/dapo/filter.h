/* common/dapo/filter.h: DAPO dynamic sampling — the group filter (docs/design.md §1 step 3).
 * Source: verl recipe/dapo `RayDAPOTrainer.fit` (docs/design.md commit): per prompt uid, collect the metric of its
 * responses; keep the group when np.std(values) > 0 or the group has one response; otherwise drop it.
 * Metric names as verl: `acc` (the verifier's 0/1 accuracy, the default), `score` (the verifier's raw score,
 * without the overlong penalty: verl's reward_extra_info["score"]), `seq_reward` (token_level_scores summed:
 * score + overlong penalty), `seq_final_reward` (token_level_rewards summed; equal to seq_reward in DAPO,
 * which has no KL-in-reward). So with metric `acc` the filter never sees the length-shaped reward: a group
 * whose responses are all wrong but differ only through overlong penalties is filtered out.
 * "std > 0" is implemented as "not all values equal" (its intent; np.std of equal fp values can come out a
 * few ulps above 0, which would keep such a group in verl — a corner our filter does not reproduce).
 * Ours beyond verl: batch/solve_none and batch/solve_all counts (groups with every acc 0 / every acc 1).
 * Not here: generation rounds, max_num_gen_batches, batch alignment (the coordinator). */
#ifndef DAPO_FILTER_H
#define DAPO_FILTER_H

#include <stdint.h>

#include "core/err.h"

typedef enum {
    FILTER_METRIC_ACC = 0,          /* "acc" */
    FILTER_METRIC_SCORE,            /* "score" */
    FILTER_METRIC_SEQ_REWARD,       /* "seq_reward" */
    FILTER_METRIC_SEQ_FINAL_REWARD, /* "seq_final_reward" */
} FilterMetric;

/* verl's metric name -> enum; ERR_INVAL naming the allowed names otherwise. */
int filter_metric_parse(const char *name, FilterMetric *metric, char err[ERR_LEN]);
const char *filter_metric_name(FilterMetric metric);   /* static string; "?" when out of range */

/* The value the filter compares for one response, from what the verifier returned:
 * score (raw, +-1), acc (0/1), penalty (overlong penalty, <= 0). acc -> acc; score -> score;
 * seq_reward and seq_final_reward -> score + penalty (the reward the advantages use). */
double filter_metric_value(FilterMetric metric, double score, double acc, double penalty);

typedef struct {
    int n_groups;     /* groups looked at */
    int n_kept;       /* kept (mixed metric, or a single response) */
    int n_filtered;   /* n_groups - n_kept */
} FilterStats;

/* value[n_resp]: the metric per response, groups contiguous, group_size[g] >= 1. Writes keep[g] = 1 / 0
 * (caller-owned [n_groups]) and, when st is non-NULL, the counts. Returns 0, or ERR_INVAL for a bad group
 * size / NULL arrays. A group of more than one response holding a NaN is dropped, as in verl (np.std is
 * then NaN, and NaN > 0 is false). */
int filter_groups(const double *value, const int *group_size, int n_groups, uint8_t *keep, FilterStats *st,
                  char err[ERR_LEN]);

/* Counts groups whose every acc is <= 0 (solve_none) and whose every acc is >= 1 (solve_all), for the
 * batch/solve_none and batch/solve_all metrics (counts; divide by n_groups for fractions). 0 or ERR_INVAL. */
int filter_solve_counts(const double *acc, const int *group_size, int n_groups, int *solve_none,
                        int *solve_all, char err[ERR_LEN]);

#endif
