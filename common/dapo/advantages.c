/* common/dapo/advantages.c: GRPO group-normalised outcome advantages (formula and source in advantages.h).
 * Not here: token broadcasting, advantage metrics (critic/advantages/mean etc.: the coordinator). */
#include "dapo/advantages.h"

#include <math.h>

int adv_grpo(const float *reward, const int *group_size, int n_groups, bool norm_by_std, double eps,
             float *adv, char err[ERR_LEN]) {
    if (n_groups < 0 || (n_groups > 0 && (!reward || !group_size || !adv)))
        return err_set(err, ERR_INVAL, "adv_grpo: bad arguments (n_groups %d)", n_groups);
    if (!(eps >= 0.0)) return err_set(err, ERR_INVAL, "adv_grpo: epsilon must be >= 0, got %g", eps);
    int off = 0;
    for (int g = 0; g < n_groups; g++) {
        int n = group_size[g];
        if (n < 1) return err_set(err, ERR_INVAL, "adv_grpo: group %d has size %d (must be >= 1)", g, n);
        for (int i = 0; i < n; i++)
            if (!isfinite(reward[off + i]))
                return err_set(err, ERR_INVAL, "adv_grpo: reward of response %d (group %d) is not finite",
                               off + i, g);
        off += n;
    }
    off = 0;
    for (int g = 0; g < n_groups; g++) {
        const int n = group_size[g];
        const float *r = reward + off;
        double mean = 0.0, std = 1.0;
        bool all_equal = true;
        for (int i = 1; i < n; i++) all_equal &= r[i] == r[0];
        if (n > 1) {
            for (int i = 0; i < n; i++) mean += r[i];
            mean /= n;
            double ss = 0.0;
            for (int i = 0; i < n; i++) ss += (r[i] - mean) * (r[i] - mean);
            std = sqrt(ss / (n - 1));
        }
        for (int i = 0; i < n; i++) {
            double a;
            if (n > 1 && all_equal) a = 0.0;
            else if (norm_by_std) a = (r[i] - mean) / (std + eps);
            else a = r[i] - mean;
            adv[off + i] = (float)a;
        }
        off += n;
    }
    return 0;
}
