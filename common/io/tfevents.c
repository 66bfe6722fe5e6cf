/* common/io/tfevents.c: TensorBoard scalar event files (see tfevents.h). */
#include "io/tfevents.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "tensorboard.pb-c.h"

struct TfEvents {
    FILE *f;
    char  path[1024];
};

static uint32_t g_table[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        g_table[i] = c;
    }
}

uint32_t crc32c(const void *buf, size_t n) {
    pthread_once(&g_once, crc_init);
    const uint8_t *p = buf;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = g_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t crc32c_masked(const void *buf, size_t n) {
    uint32_t c = crc32c(buf, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* One TFRecord holding the packed event. */
static int write_event(TfEvents *w, const Tensorboard__Event *ev) {
    size_t n = tensorboard__event__get_packed_size(ev);
    uint8_t *buf = xmalloc(12 + n + 4);
    put_le(buf, n, 8);
    put_le(buf + 8, crc32c_masked(buf, 8), 4);
    tensorboard__event__pack(ev, buf + 12);
    put_le(buf + 12 + n, crc32c_masked(buf + 12, n), 4);
    int ok = fwrite(buf, 1, 12 + n + 4, w->f) == 12 + n + 4 && fflush(w->f) == 0;
    xfree(buf);
    return ok ? 0 : ERR_IO;
}

TfEvents *tfevents_open(const char *dir, char err[ERR_LEN]) {
    if (fs_mkdir_p(dir, err)) return NULL;
    TfEvents *w = xcalloc(1, sizeof *w);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    int k = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%d", dir, (long long)time(NULL), host,
                     (int)getpid());
    if (k < 0 || (size_t)k >= sizeof w->path) {
        err_set(err, ERR_INVAL, "tensorboard: directory name too long: %s", dir);
        xfree(w);
        return NULL;
    }
    w->f = fopen(w->path, "ab");
    if (!w->f) {
        err_set(err, ERR_IO, "tensorboard: cannot create %s: %s", w->path, strerror(errno));
        xfree(w);
        return NULL;
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ev.wall_time = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if (write_event(w, &ev)) {
        err_set(err, ERR_IO, "tensorboard: cannot write %s: %s", w->path, strerror(errno));
        tfevents_close(w);
        return NULL;
    }
    return w;
}

int tfevents_write_scalars(TfEvents *w, long step, double wall_time, const Metrics *m) {
    Tensorboard__SummaryValue *vals = xcalloc(m->n ? (size_t)m->n : 1, sizeof *vals);
    Tensorboard__SummaryValue **ptrs = xcalloc(m->n ? (size_t)m->n : 1, sizeof *ptrs);
    size_t nv = 0;
    for (int i = 0; i < m->n; i++) {
        if (!isfinite(m->m[i].value)) continue;
        tensorboard__summary_value__init(&vals[nv]);
        vals[nv].tag = (char *)m->m[i].name;
        vals[nv].value_case = TENSORBOARD__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
        vals[nv].simple_value = (float)m->m[i].value;
        ptrs[nv] = &vals[nv];
        nv++;
    }
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = nv;
    sum.value = ptrs;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    int rc = write_event(w, &ev);
    xfree(vals);
    xfree(ptrs);
    return rc;
}

const char *tfevents_path(const TfEvents *w) { return w->path; }

void tfevents_close(TfEvents *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    xfree(w);
}
