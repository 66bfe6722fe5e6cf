/* common/io/safetensors.c: safetensors reader (mmap + jansson header) and writer (one file, F32/BF16).
 * Not here: sharded writing; dtypes beyond F32/BF16/F16/F64/I32/I64. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"

#define ST_MAX_HEADER (100u << 20)   /* the format's own bound on the JSON header (100 MB) */
#define ST_MAX_FILES  4096

typedef struct {
    void  *map;
    size_t len;
} StFile;

struct SafeTensors {
    StFile   *files;
    int       n_files;
    StTensor *t;
    int       n, cap;
    json_t   *meta;          /* "__metadata__" object of the first file, or NULL */
};

/* ------------------------------------------------------------------------------------ conversions */
static int dtype_size(StDtype d) {
    switch (d) {
    case ST_F32: case ST_I32: return 4;
    case ST_BF16: case ST_F16: return 2;
    case ST_I64: case ST_F64: return 8;
    }
    return 0;
}

static const char *dtype_name(StDtype d) {
    static const char *names[] = { "F32", "BF16", "F16", "I32", "I64", "F64" };
    return (unsigned)d < 6 ? names[d] : "?";
}

static int dtype_parse(const char *s, StDtype *d) {
    for (int i = 0; i < 6; i++)
        if (!strcmp(s, dtype_name((StDtype)i))) { *d = (StDtype)i; return 0; }
    return -1;
}

/* ------------------------------------------------------------------------------------ reading */
static int add_file(SafeTensors *st, const char *path, const char *only_names_from, char err[ERR_LEN]) {
    (void)only_names_from;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) { int e = errno; close(fd); return err_set(err, ERR_IO, "%s: %s", path, strerror(e)); }
    size_t len = (size_t)sb.st_size;
    if (len < 8) { close(fd); return err_set(err, ERR_DECODE, "%s: file too short (%zu bytes)", path, len); }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return err_set(err, ERR_IO, "%s: mmap: %s", path, strerror(errno));
    st->files[st->n_files++] = (StFile){ map, len };

    const unsigned char *p = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen > ST_MAX_HEADER || hlen > len - 8)
        return err_set(err, ERR_DECODE, "%s: header length %llu exceeds file size %zu", path,
                       (unsigned long long)hlen, len);
    json_error_t je;
    json_t *h = json_loadb((const char *)p + 8, (size_t)hlen, JSON_ALLOW_NUL, &je);
    if (!h || !json_is_object(h)) {
        json_decref(h);
        return err_set(err, ERR_DECODE, "%s: header is not a JSON object (%s)", path, h ? "" : je.text);
    }
    const unsigned char *data = p + 8 + hlen;
    size_t data_len = len - 8 - (size_t)hlen;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(h, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if (!st->meta && json_is_object(v)) st->meta = json_incref(v);
            continue;
        }
        json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
               *jo = json_object_get(v, "data_offsets");
        StTensor t = { 0 };
        if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2) {
            rc = err_set(err, ERR_DECODE, "%s: tensor '%s': malformed header entry", path, key);
            break;
        }
        if (dtype_parse(json_string_value(jd), &t.dtype) != 0) {
            rc = err_set(err, ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s not supported (F32/BF16/F16/F64/I32/I64)",
                         path, key, json_string_value(jd));
            break;
        }
        if (json_array_size(js) > ST_MAX_DIMS) {
            rc = err_set(err, ERR_UNSUPPORTED, "%s: tensor '%s': %zu dims", path, key, json_array_size(js));
            break;
        }
        t.ndim = (int)json_array_size(js);
        t.numel = 1;
        for (int i = 0; i < t.ndim; i++) {
            json_t *e = json_array_get(js, (size_t)i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > (1LL << 40)) {
                rc = err_set(err, ERR_DECODE, "%s: tensor '%s': bad shape", path, key);
                break;
            }
            t.shape[i] = json_integer_value(e);
            if (t.shape[i] && t.numel > (INT64_C(1) << 40) / t.shape[i]) {
                rc = err_set(err, ERR_DECODE, "%s: tensor '%s': shape too large", path, key);
                break;
            }
            t.numel *= t.shape[i];
        }
        if (rc) break;
        json_t *j0 = json_array_get(jo, 0), *j1 = json_array_get(jo, 1);
        if (!json_is_integer(j0) || !json_is_integer(j1)) {
            rc = err_set(err, ERR_DECODE, "%s: tensor '%s': bad data_offsets", path, key);
            break;
        }
        json_int_t o0 = json_integer_value(j0), o1 = json_integer_value(j1);
        if (o0 < 0 || o1 < o0 || (uint64_t)o1 > data_len ||
            (uint64_t)(o1 - o0) != (uint64_t)t.numel * (uint64_t)dtype_size(t.dtype)) {
            rc = err_set(err, ERR_DECODE, "%s: tensor '%s': data_offsets [%lld, %lld] disagree with shape/dtype "
                         "or file size", path, key, (long long)o0, (long long)o1);
            break;
        }
        t.data = data + o0;
        t.nbytes = (size_t)(o1 - o0);
        for (int i = 0; i < st->n; i++)
            if (!strcmp(st->t[i].name, key)) { rc = err_set(err, ERR_DECODE, "%s: tensor '%s' appears twice", path, key); break; }
        if (rc) break;
        XGROW(st->t, st->n, st->cap, 64);
        t.name = xstrdup(key);
        st->t[st->n++] = t;
    }
    json_decref(h);
    return rc;
}

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int open_index(SafeTensors *st, const char *dir, const char *index, char err[ERR_LEN]) {
    json_error_t je;
    json_t *j = json_load_file(index, 0, &je);
    if (!j && je.line > 0) return err_set(err, ERR_DECODE, "%s:%d: %s", index, je.line, je.text);
    if (!j) return err_set(err, ERR_DECODE, "%s: %s", index, je.text);        /* no line: it could not be read */
    json_t *wm = json_object_get(j, "weight_map");
    if (!json_is_object(wm)) { json_decref(j); return err_set(err, ERR_DECODE, "%s: no \"weight_map\" object", index); }
    /* distinct shard names, in first-seen order */
    const char *key;
    json_t *v;
    const char **shards = xcalloc(json_object_size(wm) + 1, sizeof *shards);
    int ns = 0, rc = 0;
    json_object_foreach(wm, key, v) {
        if (!json_is_string(v)) { rc = err_set(err, ERR_DECODE, "%s: weight_map['%s'] is not a string", index, key); break; }
        const char *s = json_string_value(v);
        if (strchr(s, '/') || !strcmp(s, "..")) { rc = err_set(err, ERR_DECODE, "%s: shard name '%s' not a plain file name", index, s); break; }
        int seen = 0;
        for (int i = 0; i < ns; i++) seen |= !strcmp(shards[i], s);
        if (!seen) shards[ns++] = s;
    }
    if (!rc && ns > ST_MAX_FILES) rc = err_set(err, ERR_TOO_BIG, "%s: %d shards", index, ns);
    if (!rc) {
        st->files = xcalloc((size_t)ns + 1, sizeof *st->files);
        for (int i = 0; i < ns && !rc; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, shards[i]);
            rc = add_file(st, path, NULL, err);
        }
    }
    /* every tensor the index names must be present */
    if (!rc)
        json_object_foreach(wm, key, v)
            if (!st_find(st, key)) { rc = err_set(err, ERR_NOTFOUND, "%s: tensor '%s' not in shard %s", index, key, json_string_value(v)); break; }
    xfree(shards);
    json_decref(j);
    return rc;
}

SafeTensors *st_open(const char *path, char err[ERR_LEN]) {
    SafeTensors *st = xcalloc(1, sizeof *st);
    int rc;
    if (is_dir(path)) {
        char f[PATH_MAX];
        snprintf(f, sizeof f, "%s/model.safetensors", path);
        if (file_exists(f)) {
            st->files = xcalloc(1, sizeof *st->files);
            rc = add_file(st, f, NULL, err);
        } else {
            snprintf(f, sizeof f, "%s/model.safetensors.index.json", path);
            if (file_exists(f)) rc = open_index(st, path, f, err);
            else rc = err_set(err, ERR_NOTFOUND, "%s: neither model.safetensors nor model.safetensors.index.json", path);
        }
    } else {
        st->files = xcalloc(1, sizeof *st->files);
        rc = add_file(st, path, NULL, err);
    }
    if (rc) { st_close(st); return NULL; }
    return st;
}

void st_close(SafeTensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n_files; i++) munmap(st->files[i].map, st->files[i].len);
    for (int i = 0; i < st->n; i++) xfree(st->t[i].name);
    xfree(st->t);
    xfree(st->files);
    json_decref(st->meta);
    xfree(st);
}

int st_count(const SafeTensors *st) { return st->n; }
const StTensor *st_get(const SafeTensors *st, int i) { return i >= 0 && i < st->n ? &st->t[i] : NULL; }

const StTensor *st_find(const SafeTensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->t[i].name, name)) return &st->t[i];
    return NULL;
}

const char *st_metadata(const SafeTensors *st, const char *key) {
    json_t *v = st->meta ? json_object_get(st->meta, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int st_read_f32_range(const SafeTensors *st, const char *name, size_t first, size_t n, float *dst, char err[ERR_LEN]) {
    const StTensor *t = st_find(st, name);
    if (!t) return err_set(err, ERR_NOTFOUND, "tensor '%s' not found", name);
    if (first > (size_t)t->numel || n > (size_t)t->numel - first)
        return err_set(err, ERR_INVAL, "tensor '%s': elements [%zu, %zu) outside its %lld", name, first, first + n,
                       (long long)t->numel);
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case ST_F32: memcpy(dst, p + 4 * first, n * 4); break;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * (first + i), 2); dst[i] = dtype_bf16_to_f32(h); }
        break;
    case ST_F16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * (first + i), 2); dst[i] = dtype_f16_to_f32(h); }
        break;
    case ST_F64:
        for (size_t i = 0; i < n; i++) { double d; memcpy(&d, p + 8 * (first + i), 8); dst[i] = (float)d; }
        break;
    default:
        return err_set(err, ERR_UNSUPPORTED, "tensor '%s': dtype %s is not a float type", name, dtype_name(t->dtype));
    }
    return 0;
}

int st_read_f32(const SafeTensors *st, const char *name, float *dst, size_t n, char err[ERR_LEN]) {
    const StTensor *t = st_find(st, name);
    if (!t) return err_set(err, ERR_NOTFOUND, "tensor '%s' not found", name);
    if ((size_t)t->numel != n)
        return err_set(err, ERR_INVAL, "tensor '%s': %lld elements, expected %zu", name, (long long)t->numel, n);
    return st_read_f32_range(st, name, 0, n, dst, err);
}

int st_read_i32(const SafeTensors *st, const char *name, int32_t *dst, size_t n, char err[ERR_LEN]) {
    const StTensor *t = st_find(st, name);
    if (!t) return err_set(err, ERR_NOTFOUND, "tensor '%s' not found", name);
    if ((size_t)t->numel != n)
        return err_set(err, ERR_INVAL, "tensor '%s': %lld elements, expected %zu", name, (long long)t->numel, n);
    const unsigned char *p = t->data;
    if (t->dtype == ST_I32) memcpy(dst, p, n * 4);
    else if (t->dtype == ST_I64)
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, p + 8 * i, 8);
            if (v < INT32_MIN || v > INT32_MAX) return err_set(err, ERR_INVAL, "tensor '%s': value %lld out of int32", name, (long long)v);
            dst[i] = (int32_t)v;
        }
    else return err_set(err, ERR_UNSUPPORTED, "tensor '%s': dtype %s is not an integer type", name, dtype_name(t->dtype));
    return 0;
}

/* ------------------------------------------------------------------------------------ writing */
static int write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

int st_write(const char *path, const StWriteTensor *t, int n, StDtype dtype, const char *const *meta,
             int n_meta, char err[ERR_LEN]) {
    if (dtype != ST_F32 && dtype != ST_BF16) return err_set(err, ERR_INVAL, "st_write: dtype must be F32 or BF16");
    json_t *h = json_object(), *jm = json_object();
    int has_format = 0;
    for (int i = 0; i < n_meta; i++) {
        json_object_set_new(jm, meta[2 * i], json_string(meta[2 * i + 1]));
        has_format |= !strcmp(meta[2 * i], "format");
    }
    if (!has_format) json_object_set_new(jm, "format", json_string("pt"));
    json_object_set_new(h, "__metadata__", jm);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS || (!t[i].f32 && !t[i].i32)) {
            json_decref(h);
            return err_set(err, ERR_INVAL, "st_write: tensor '%s': bad ndim or no data", t[i].name);
        }
        StDtype d = t[i].i32 ? ST_I32 : dtype;
        uint64_t numel = 1;
        json_t *js = json_array();
        for (int k = 0; k < t[i].ndim; k++) { numel *= (uint64_t)t[i].shape[k]; json_array_append_new(js, json_integer(t[i].shape[k])); }
        uint64_t nb = numel * (uint64_t)dtype_size(d);
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(dtype_name(d)));
        json_object_set_new(e, "shape", js);
        json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)(off + nb)));
        json_object_set_new(h, t[i].name, e);
        off += nb;
    }
    char *hs = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!hs) return err_set(err, ERR_NOMEM, "st_write: header dump failed");
    size_t hl = strlen(hs), pad = (8 - hl % 8) % 8;
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) { int e = errno; free(hs); return err_set(err, ERR_IO, "%s: %s", tmp, strerror(e)); }
    unsigned char lenb[8];
    uint64_t hl8 = hl + pad;
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)(hl8 >> (8 * i));
    int bad = write_all(f, lenb, 8) || write_all(f, hs, hl) || write_all(f, "        ", pad);
    free(hs);
    enum { CH = 16384 };
    uint16_t buf16[CH];
    for (int i = 0; i < n && !bad; i++) {
        size_t numel = 1;
        for (int k = 0; k < t[i].ndim; k++) numel *= (size_t)t[i].shape[k];
        if (t[i].i32) bad = write_all(f, t[i].i32, numel * 4);
        else if (dtype == ST_F32) bad = write_all(f, t[i].f32, numel * 4);
        else
            for (size_t o = 0; o < numel && !bad; o += CH) {
                size_t m = numel - o < CH ? numel - o : CH;
                for (size_t k = 0; k < m; k++) buf16[k] = dtype_bf16_from_f32(t[i].f32[o + k]);
                bad = write_all(f, buf16, m * 2);
            }
    }
    if (!bad) bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) { bad = 1; e = errno; }
    if (!bad && rename(tmp, path) != 0) { bad = 1; e = errno; }
    if (bad) { unlink(tmp); return err_set(err, ERR_IO, "%s: write failed: %s", path, strerror(e)); }
    return 0;
}
