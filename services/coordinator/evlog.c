/* services/coordinator/evlog.c: the event log's writer and reader (evlog.h). Calls no other coordinator file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "evlog.h"

#define EVLOG_MAGIC "DAPOEVLOG1\n"

struct EvLog {
    FILE   *f;
    char    path[1024];
    uint8_t *buf;                  /* one record's payload, grown as needed */
    size_t  len, cap;
    int     failed;
};

static void put(EvLog *l, const void *p, size_t n) {
    if (l->len + n > l->cap) {
        l->cap = (l->len + n) * 2;
        l->buf = xrealloc(l->buf, l->cap);
    }
    if (n) memcpy(l->buf + l->len, p, n);
    l->len += n;
}
static void put_u8(EvLog *l, uint8_t v) { put(l, &v, 1); }
static void put_u16(EvLog *l, uint16_t v) { uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)}; put(l, b, 2); }
static void put_u32(EvLog *l, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(l, b, 4);
}
static void put_u64(EvLog *l, uint64_t v) { put_u32(l, (uint32_t)v); put_u32(l, (uint32_t)(v >> 32)); }
static void put_str8(EvLog *l, const void *p, size_t n) {      /* u8 length + bytes (cut at 255) */
    if (n > 255) n = 255;
    put_u8(l, (uint8_t)n);
    put(l, p, n);
}

/* Writes the record collected in l->buf under tag. */
static void flush_record(EvLog *l, char tag) {
    uint8_t h[5] = {(uint8_t)tag, (uint8_t)l->len, (uint8_t)(l->len >> 8), (uint8_t)(l->len >> 16),
                    (uint8_t)(l->len >> 24)};
    if (!l->failed && (fwrite(h, 1, 5, l->f) != 5 || fwrite(l->buf, 1, l->len, l->f) != l->len)) {
        log_error("cluster.event_log %s: write failed (%s): the event log stops here; the run goes on", l->path,
                  strerror(errno));
        l->failed = 1;
    }
    l->len = 0;
}

EvLog *evlog_open(const char *path, const char *run_id, const Config *cfg, char err[ERR_LEN]) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        err_set(err, ERR_IO, "cluster.event_log: cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    EvLog *l = xcalloc(1, sizeof *l);
    l->f = f;
    snprintf(l->path, sizeof l->path, "%s", path);
    fputs(EVLOG_MAGIC, f);
    char *yaml = NULL;
    size_t ylen = 0;
    FILE *m = open_memstream(&yaml, &ylen);
    if (m) {
        config_print_yaml(cfg, m);
        fclose(m);
    }
    put(l, run_id, strlen(run_id) + 1);
    put(l, yaml ? yaml : "", (yaml ? ylen : 0) + 1);
    free(yaml);
    flush_record(l, 'H');
    return l;
}

void evlog_event(EvLog *l, const Event *ev) {
    if (!l || l->failed) return;
    const NetMsg *m = ev->msg;
    put_u8(l, (uint8_t)ev->kind);
    put_u32(l, (uint32_t)ev->worker);
    put_u32(l, (uint32_t)(m ? m->type : ev->type));
    put_u64(l, ev->item);
    put_u32(l, ev->attempt);
    put_u32(l, (uint32_t)ev->code);
    put_u16(l, m ? m->version : 0);
    put_str8(l, m ? m->peer : NULL, m ? m->peer_len : 0);
    put_str8(l, m ? m->peer_key : "", m ? strlen(m->peer_key) : 0);
    put_str8(l, m ? m->peer_address : "", m ? strlen(m->peer_address) : 0);
    if (m && m->msg) {
        size_t n;
        uint8_t *frame = net_encode(m->type, m->msg, &n);
        if (frame) put(l, frame, n);
        xfree(frame);
    }
    flush_record(l, 'E');
}

void evlog_action(EvLog *l, const OutAction *a) {
    if (!l || l->failed) return;
    put_u8(l, (uint8_t)a->kind);
    put_u32(l, (uint32_t)a->worker);
    put_u32(l, (uint32_t)a->type);
    put_str8(l, a->rid, a->worker < 0 ? a->rid_len : 0);
    if (a->frame) put(l, a->frame, a->len);
    flush_record(l, 'A');
}

void evlog_close(EvLog *l) {
    if (!l) return;
    if (fclose(l->f) && !l->failed) log_error("cluster.event_log %s: %s", l->path, strerror(errno));
    xfree(l->buf);
    xfree(l);
}

/* ------------------------------------------------------------------------------------------------ reader */

struct EvLogReader {
    FILE    *f;
    long     off;
    uint8_t *buf;
    size_t   cap;
};

EvLogReader *evlog_reader_open(const char *path, char err[ERR_LEN]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char magic[sizeof EVLOG_MAGIC] = "";
    if (fread(magic, 1, sizeof EVLOG_MAGIC - 1, f) != sizeof EVLOG_MAGIC - 1 || memcmp(magic, EVLOG_MAGIC, sizeof EVLOG_MAGIC - 1)) {
        fclose(f);
        err_set(err, ERR_DECODE, "%s: not a dapo event log (no " "DAPOEVLOG1 header)", path);
        return NULL;
    }
    EvLogReader *rd = xcalloc(1, sizeof *rd);
    rd->f = f;
    rd->off = (long)sizeof EVLOG_MAGIC - 1;
    return rd;
}

typedef struct { const uint8_t *p; size_t n; int bad; } Cur;
static const uint8_t *take(Cur *c, size_t n) {
    if (c->bad || c->n < n) { c->bad = 1; return NULL; }
    const uint8_t *p = c->p;
    c->p += n;
    c->n -= n;
    return p;
}
static uint32_t get_u32(Cur *c) {
    const uint8_t *p = take(c, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24 : 0;
}
static uint8_t get_u8(Cur *c) { const uint8_t *p = take(c, 1); return p ? p[0] : 0; }
static const uint8_t *get_str8(Cur *c, size_t *n) { *n = get_u8(c); return take(c, *n); }
static void get_cstr8(Cur *c, char *out, size_t cap) {
    size_t n;
    const uint8_t *p = get_str8(c, &n);
    if (n >= cap) n = cap - 1;
    if (p && n) memcpy(out, p, n);
    out[p ? n : 0] = 0;
}

static int parse(const uint8_t *buf, size_t n, char tag, EvRecord *r) {
    Cur c = {buf, n, 0};
    r->tag = tag;
    if (tag == 'H') {
        const uint8_t *z = n ? memchr(buf, 0, n) : NULL;
        if (!z || buf[n - 1] != 0) return -1;
        r->run_id = (const char *)buf;
        r->frame = z + 1;
        r->frame_len = n - (size_t)(z + 1 - buf) - 1;
        return 0;
    }
    r->kind = get_u8(&c);
    r->worker = (int32_t)get_u32(&c);
    r->type = (Dapo__MsgType)get_u32(&c);
    if (tag == 'E') {
        uint64_t lo = get_u32(&c), hi = get_u32(&c);
        r->item = lo | hi << 32;
        r->attempt = get_u32(&c);
        r->code = (int32_t)get_u32(&c);
        const uint8_t *v = take(&c, 2);
        r->version = v ? (uint16_t)(v[0] | v[1] << 8) : 0;
        r->peer = get_str8(&c, &r->peer_len);
        get_cstr8(&c, r->key, sizeof r->key);
        get_cstr8(&c, r->address, sizeof r->address);
    } else if (tag == 'A') {
        r->peer = get_str8(&c, &r->peer_len);
    } else {
        return -1;
    }
    if (c.bad) return -1;
    r->frame = c.p;
    r->frame_len = c.n;
    return 0;
}

int evlog_next(EvLogReader *rd, EvRecord *r, char err[ERR_LEN]) {
    memset(r, 0, sizeof *r);
    uint8_t h[5];
    size_t got = fread(h, 1, 5, rd->f);
    if (got == 0 && feof(rd->f)) return 0;
    size_t n = got == 5 ? (size_t)h[1] | (size_t)h[2] << 8 | (size_t)h[3] << 16 | (size_t)h[4] << 24 : 0;
    if (got == 5 && n + 1 > rd->cap) {
        rd->cap = n + 1;
        rd->buf = xrealloc(rd->buf, rd->cap);
    }
    if (got != 5 || fread(rd->buf, 1, n, rd->f) != n || parse(rd->buf, n, (char)h[0], r))
        return err_set(err, ERR_DECODE, "event log: the record at byte %ld does not parse (cut short?)", rd->off);
    rd->off += 5 + (long)n;
    return 1;
}

void evlog_reader_close(EvLogReader *rd) {
    if (!rd) return;
    fclose(rd->f);
    xfree(rd->buf);
    xfree(rd);
}
