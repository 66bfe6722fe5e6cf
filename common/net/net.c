/* common/net/net.c: framing, bounded unpacking and socket helpers over libzmq. */
#include "net/net.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "core/rng.h"

#define DEFAULT_MAX_BYTES ((int64_t)256 << 20)

static const struct {
    const char *name;
    const ProtobufCMessageDescriptor *desc;
} msg_types[] = {
    [DAPO__MSG_TYPE__MSG_HELLO]          = {"hello", &dapo__hello__descriptor},
    [DAPO__MSG_TYPE__MSG_WELCOME]        = {"welcome", &dapo__welcome__descriptor},
    [DAPO__MSG_TYPE__MSG_HEARTBEAT]      = {"heartbeat", &dapo__heartbeat__descriptor},
    [DAPO__MSG_TYPE__MSG_CREDIT]         = {"credit", &dapo__credit__descriptor},
    [DAPO__MSG_TYPE__MSG_LEASE_RENEW]    = {"lease_renew", &dapo__lease_renew__descriptor},
    [DAPO__MSG_TYPE__MSG_CANCEL]         = {"cancel", &dapo__cancel__descriptor},
    [DAPO__MSG_TYPE__MSG_GOODBYE]        = {"goodbye", &dapo__goodbye__descriptor},
    [DAPO__MSG_TYPE__MSG_GENERATE_GROUP] = {"generate_group", &dapo__generate_group__descriptor},
    [DAPO__MSG_TYPE__MSG_GROUP_RESULT]   = {"group_result", &dapo__group_result__descriptor},
    [DAPO__MSG_TYPE__MSG_SCORE_REQUEST]  = {"score_request", &dapo__score_request__descriptor},
    [DAPO__MSG_TYPE__MSG_SCORE_RESULT]   = {"score_result", &dapo__score_result__descriptor},
    [DAPO__MSG_TYPE__MSG_TRAIN_BATCH]    = {"train_batch", &dapo__train_batch__descriptor},
    [DAPO__MSG_TYPE__MSG_STEP_RESULT]    = {"step_result", &dapo__step_result__descriptor},
    [DAPO__MSG_TYPE__MSG_WEIGHT_UPDATE]  = {"weight_update", &dapo__weight_update__descriptor},
    [DAPO__MSG_TYPE__MSG_WEIGHT_RESEND]  = {"weight_resend", &dapo__weight_resend__descriptor},
    [DAPO__MSG_TYPE__MSG_CONTROL]        = {"control", &dapo__control__descriptor},
    [DAPO__MSG_TYPE__MSG_ERROR]          = {"error", &dapo__error_reply__descriptor},
    [DAPO__MSG_TYPE__MSG_WEIGHT_ACK]     = {"weight_ack", &dapo__weight_ack__descriptor},
};
#define NTYPES (sizeof msg_types / sizeof msg_types[0])

const ProtobufCMessageDescriptor *net_descriptor(Dapo__MsgType type) {
    return (unsigned)type < NTYPES ? msg_types[type].desc : NULL;
}

const char *net_type_name(Dapo__MsgType type) {
    return (unsigned)type < NTYPES && msg_types[type].name ? msg_types[type].name : "unknown";
}

static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t net_encode_into(Dapo__MsgType type, const ProtobufCMessage *m, size_t packed, uint8_t *buf) {
    memcpy(buf, "DAPO", 4);
    put_u16(buf + 4, DAPO_PROTOCOL_VERSION);
    put_u16(buf + 6, (uint16_t)type);
    put_u32(buf + 8, (uint32_t)packed);
    if (m && packed) protobuf_c_message_pack(m, buf + NET_HEADER_BYTES);
    return NET_HEADER_BYTES + packed;
}

uint8_t *net_encode(Dapo__MsgType type, const ProtobufCMessage *m, size_t *len) {
    size_t n = m ? protobuf_c_message_get_packed_size(m) : 0;
    if (n > UINT32_MAX) return NULL;
    uint8_t *buf = xmalloc(NET_HEADER_BYTES + n);
    *len = net_encode_into(type, m, n, buf);
    return buf;
}

/* ------------------------------------------------------------------------------------------ arenas */

/* One block of an arena; the first block is the arena's handle, later ones hang off it (newest first). */
struct NetArena {
    NetArena    *more;
    size_t       cap, used;
    max_align_t  data[];
};

#define ARENA_ALIGN sizeof(max_align_t)

static NetArena *arena_block(size_t cap) {
    NetArena *b = xmalloc(sizeof *b + cap);
    b->more = NULL;
    b->cap = cap;
    b->used = 0;
    return b;
}

static void *arena_alloc(void *ad, size_t n) {
    NetArena *a = ad;
    n = (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (n == 0) n = ARENA_ALIGN;
    NetArena *b = a->cap - a->used >= n ? a : (a->more && a->more->cap - a->more->used >= n ? a->more : NULL);
    if (!b) {                                     /* a new block, at least as big as everything so far */
        size_t cap = a->cap + (a->more ? a->more->cap : 0);
        b = arena_block(n > cap ? n : cap);
        b->more = a->more;
        a->more = b;
    }
    void *p = (unsigned char *)b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free_ptr(void *ad, void *p) { (void)ad; (void)p; }   /* freed with the arena */

void net_arena_free(NetArena *a) {
    if (!a) return;
    for (NetArena *b = a->more, *next; b; b = next) { next = b->more; xfree(b); }
    xfree(a);
}

/* ------------------------------------------------------------------------------------------ decode */

static int decode(const uint8_t *buf, size_t len, size_t max_bytes, Dapo__MsgType *type, uint16_t *version,
                  ProtobufCMessage **msg, ProtobufCAllocator *alloc, char err[ERR_LEN]) {
    *msg = NULL;
    *type = DAPO__MSG_TYPE__MSG_UNKNOWN;
    *version = 0;
    if (!max_bytes) max_bytes = DEFAULT_MAX_BYTES;
    if (len < NET_HEADER_BYTES)
        return err_set(err, ERR_DECODE, "truncated frame: %zu bytes, a header is %d", len, NET_HEADER_BYTES);
    if (memcmp(buf, "DAPO", 4) != 0) return err_set(err, ERR_DECODE, "bad magic: not a dapo frame");
    *version = get_u16(buf + 4);
    *type = (Dapo__MsgType)get_u16(buf + 6);
    uint32_t plen = get_u32(buf + 8);
    if (*version != DAPO_PROTOCOL_VERSION) {
        /* Hello, Welcome and ErrorReply are frozen across versions, so a mismatch can still be explained to
         * the peer: unpack them, but report the mismatch. Anything else from another version is dropped. */
        if ((*type == DAPO__MSG_TYPE__MSG_HELLO || *type == DAPO__MSG_TYPE__MSG_WELCOME ||
             *type == DAPO__MSG_TYPE__MSG_ERROR) && len <= max_bytes && plen == len - NET_HEADER_BYTES)
            *msg = protobuf_c_message_unpack(net_descriptor(*type), alloc, plen, buf + NET_HEADER_BYTES);
        return err_set(err, ERR_VERSION, "protocol version mismatch: peer speaks %u, this build speaks %d",
                       *version, DAPO_PROTOCOL_VERSION);
    }
    if (len > max_bytes)
        return err_set(err, ERR_TOO_BIG, "frame of %zu bytes is over the %zu-byte limit", len, max_bytes);
    if ((size_t)plen != len - NET_HEADER_BYTES)
        return err_set(err, ERR_DECODE, "length mismatch: header says %u payload bytes, frame has %zu", plen,
                       len - NET_HEADER_BYTES);
    const ProtobufCMessageDescriptor *d = net_descriptor(*type);
    if (!d) return err_set(err, ERR_DECODE, "unknown message type %d", (int)*type);
    *msg = protobuf_c_message_unpack(d, alloc, plen, buf + NET_HEADER_BYTES);
    if (!*msg) return err_set(err, ERR_DECODE, "malformed %s payload (%u bytes)", net_type_name(*type), plen);
    return 0;
}

int net_decode(const uint8_t *buf, size_t len, size_t max_bytes, Dapo__MsgType *type, uint16_t *version,
               ProtobufCMessage **msg, char err[ERR_LEN]) {
    return decode(buf, len, max_bytes, type, version, msg, NULL, err);
}

void *net_socket(void *ctx, int type, const char *endpoint, const NetOpts *opts, char err[ERR_LEN]) {
    NetOpts o = opts ? *opts : (NetOpts){0};
    int64_t maxb = o.max_msg_bytes > 0 ? o.max_msg_bytes : DEFAULT_MAX_BYTES;
    if (type == ZMQ_ROUTER) rng_seed_libc();          /* its generated routing ids: not guessable (core/rng.h) */
    void *s = zmq_socket(ctx, type);
    if (!s) { err_set(err, ERR_IO, "zmq_socket: %s", zmq_strerror(zmq_errno())); return NULL; }
    int one = 1;
    if (zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxb, sizeof maxb) || zmq_setsockopt(s, ZMQ_LINGER, &o.linger_ms, sizeof(int)) ||
        (type == ZMQ_ROUTER && zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one)) ||
        (o.heartbeat_ms > 0 && (zmq_setsockopt(s, ZMQ_HEARTBEAT_IVL, &o.heartbeat_ms, sizeof(int)) ||
                                zmq_setsockopt(s, ZMQ_HEARTBEAT_TIMEOUT, &o.heartbeat_timeout_ms, sizeof(int)))) ||
        (o.routing_id && zmq_setsockopt(s, ZMQ_ROUTING_ID, o.routing_id, strlen(o.routing_id)))) {
        err_set(err, ERR_IO, "zmq_setsockopt on %s: %s", endpoint, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    int crc = o.curve_server ? curve_server(s, o.curve, err) : curve_client(s, o.curve, err);
    if (crc) {
        zmq_close(s);
        return NULL;
    }
    int rc = o.bind ? zmq_bind(s, endpoint) : zmq_connect(s, endpoint);
    if (rc) {
        err_set(err, ERR_IO, "cannot %s %s: %s", o.bind ? "bind" : "connect", endpoint, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

int net_socket_reopen(void **sock, void *ctx, int type, const char *endpoint, const NetOpts *opts, char err[ERR_LEN]) {
    void *s = net_socket(ctx, type, endpoint, opts, err);
    if (!s) return ERR_IO;
    int zero = 0;
    zmq_setsockopt(*sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(*sock);
    *sock = s;
    return 0;
}

int net_last_endpoint(void *sock, char *buf, size_t len) {
    size_t n = len;
    return zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, buf, &n) ? ERR_IO : 0;
}

/* The frames of one zero-copy message share its buffer: the last frame ZeroMQ releases (on its I/O thread) hands
 * the buffer back to the sender's release callback. */
typedef struct {
    atomic_int refs;
    uint8_t   *buf;
    void     (*release)(void *buf, void *hint);
    void      *hint;
} FrameShare;

static void frame_release(void *data, void *hint) {
    (void)data;
    FrameShare *s = hint;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        s->release(s->buf, s->hint);
        xfree(s);
    }
}

static void xfree_release(void *buf, void *hint) {
    (void)hint;
    xfree(buf);
}

/* Sends buf[0, len) without a copy: one frame, or on a CURVE socket frames of at most NET_FRAME_BYTES (a plaintext
 * frame goes out and comes in without a copy, whatever its size); a frame that does not go (nor those after it)
 * drops its reference here. Once the first frame is queued, ZeroMQ takes the rest of a multipart message. */
static int send_shared(void *sock, uint8_t *buf, size_t len, int flags, void (*release)(void *, void *), void *hint) {
    int mech = 0;
    size_t msz = sizeof mech;
    size_t fb = !zmq_getsockopt(sock, ZMQ_MECHANISM, &mech, &msz) && mech == ZMQ_CURVE ? NET_FRAME_BYTES : len;
    size_t nframes = (len + fb - 1) / fb;
    FrameShare *s = xmalloc(sizeof *s);
    atomic_init(&s->refs, (int)nframes);
    s->buf = buf;
    s->release = release;
    s->hint = hint;
    int rc = 0;
    for (size_t k = 0; k < nframes; k++) {
        size_t off = k * fb, n = len - off < fb ? len - off : fb;
        zmq_msg_t f;
        if (rc || zmq_msg_init_data(&f, buf + off, n, frame_release, s)) {
            if (!rc) rc = -zmq_errno();
            frame_release(buf + off, s);
            continue;
        }
        if (zmq_msg_send(&f, sock, flags | (k + 1 < nframes ? ZMQ_SNDMORE : 0)) < 0) {
            rc = -zmq_errno();
            zmq_msg_close(&f);                          /* calls frame_release */
        }
    }
    return rc;
}

int net_send_frames(void *sock, const uint8_t *peer, size_t peer_len, uint8_t *buf, size_t len, int flags,
                    void (*release)(void *buf, void *hint), void *hint) {
    int rc = 0;
    if (peer && zmq_send(sock, peer, peer_len, flags | ZMQ_SNDMORE) < 0) rc = -zmq_errno();
    if (rc) release(buf, hint);
    else if (len >= NET_ZEROCOPY_BYTES) rc = send_shared(sock, buf, len, flags, release, hint);
    else {
        if (zmq_send(sock, buf, len, flags) < 0) rc = -zmq_errno();
        release(buf, hint);
    }
    if (rc == -EAGAIN) return ERR_AGAIN;
    if (rc == -EHOSTUNREACH) return ERR_CLOSED;
    return rc;
}

int net_send(void *sock, const uint8_t *peer, size_t peer_len, Dapo__MsgType type, const ProtobufCMessage *m,
             bool dontwait) {
    size_t len;
    uint8_t *buf = net_encode(type, m, &len);
    if (!buf) return ERR_TOO_BIG;
    return net_send_frames(sock, peer, peer_len, buf, len, dontwait ? ZMQ_DONTWAIT : 0, xfree_release, NULL);
}

/* Reads and drops the remaining frames of a multipart message. */
static void drain_more(void *sock) {
    int more = 0;
    size_t sz = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) { zmq_msg_close(&f); break; }
        zmq_msg_close(&f);
    }
}

/* Joins the frames of a multipart message whose first frame is *first (kept open: it carries the peer's metadata)
 * into a new buffer (*joined, caller xfrees; *len its size). Over max_bytes the rest is drained and ERR_TOO_BIG
 * returned, so a peer cannot make the receiver hold more than the cap. */
static int join_frames(void *sock, zmq_msg_t *first, size_t max_bytes, uint8_t **joined, size_t *len,
                       char err[ERR_LEN]) {
    if (!max_bytes) max_bytes = DEFAULT_MAX_BYTES;
    size_t n = zmq_msg_size(first), cap = 2 * n;
    const uint8_t *h = zmq_msg_data(first);
    if (n >= NET_HEADER_BYTES && !memcmp(h, "DAPO", 4))       /* the header gives the size: one buffer, one copy */
        cap = NET_HEADER_BYTES + (size_t)get_u32(h + 8);
    if (n > max_bytes || cap > max_bytes) {
        drain_more(sock);
        return err_set(err, ERR_TOO_BIG, "message of %zu bytes is over the %zu-byte limit", cap > n ? cap : n,
                       max_bytes);
    }
    if (cap < n) cap = n;
    uint8_t *buf = xmalloc(cap);
    memcpy(buf, zmq_msg_data(first), n);
    int more = 1;
    while (more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) {               /* parts of a message arrive together */
            zmq_msg_close(&f);
            xfree(buf);
            return err_set(err, ERR_DECODE, "message cut short after %zu bytes", n);
        }
        size_t m = zmq_msg_size(&f);
        more = zmq_msg_more(&f);
        if (m > max_bytes - n) {
            zmq_msg_close(&f);
            xfree(buf);
            if (more) drain_more(sock);
            return err_set(err, ERR_TOO_BIG, "message of more than %zu bytes is over the %zu-byte limit", n + m,
                           max_bytes);
        }
        if (n + m > cap) {                                            /* longer than its header said */
            cap = 2 * (n + m) < max_bytes ? 2 * (n + m) : max_bytes;
            buf = xrealloc(buf, cap);
        }
        memcpy(buf + n, zmq_msg_data(&f), m);
        n += m;
        zmq_msg_close(&f);
    }
    *joined = buf;
    *len = n;
    return 0;
}

static int recv_msg(void *sock, NetMsg *out, int timeout_ms, size_t max_bytes, int use_arena, char err[ERR_LEN]) {
    memset(out, 0, sizeof *out);
    if (timeout_ms != 0) {
        zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
        int n = zmq_poll(&it, 1, timeout_ms);
        if (n < 0 && zmq_errno() == EINTR) return ERR_TIMEOUT;     /* a signal: let the caller look at its flags */
        if (n < 0) return err_set(err, -zmq_errno(), "zmq_poll: %s", zmq_strerror(zmq_errno()));
        if (n == 0) return ERR_TIMEOUT;
    }
    int type = 0;
    size_t tsz = sizeof type;
    if (zmq_getsockopt(sock, ZMQ_TYPE, &type, &tsz)) return err_set(err, ERR_IO, "zmq_getsockopt: %s", zmq_strerror(zmq_errno()));
    zmq_msg_t f;
    zmq_msg_init(&f);
    if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&f);
        if (e == EAGAIN) return ERR_AGAIN;
        return err_set(err, -e, "zmq_msg_recv: %s", zmq_strerror(e));
    }
    if (type == ZMQ_ROUTER) {
        out->peer_len = zmq_msg_size(&f) < NET_PEER_MAX ? zmq_msg_size(&f) : NET_PEER_MAX;
        memcpy(out->peer, zmq_msg_data(&f), out->peer_len);
        zmq_msg_close(&f);
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f);
            return err_set(err, ERR_DECODE, "routing id without a body frame");
        }
    }
    /* a message over NET_FRAME_BYTES comes as several frames: join them (up to the cap) before decoding */
    uint8_t *joined = NULL;
    const uint8_t *body = zmq_msg_data(&f);
    out->bytes = zmq_msg_size(&f);
    int rc = 0;
    if (zmq_msg_more(&f)) rc = join_frames(sock, &f, max_bytes, &joined, &out->bytes, err);
    if (joined) body = joined;
    if (rc && zmq_msg_size(&f) >= NET_HEADER_BYTES && !memcmp(body, "DAPO", 4)) {   /* name what was refused */
        out->version = get_u16(body + 4);
        out->type = (Dapo__MsgType)get_u16(body + 6);
    }
    ProtobufCAllocator pa = {.alloc = arena_alloc, .free = arena_free_ptr};
    if (use_arena && !rc) {   /* room for the unpacked message in one block as a rule; more blocks when needed */
        size_t cap = 2 * out->bytes + 512;
        out->arena = arena_block(cap < ((size_t)64 << 10) ? cap : ((size_t)64 << 10));
        pa.allocator_data = out->arena;
    }
    if (!rc)
        rc = decode(body, out->bytes, max_bytes, &out->type, &out->version, &out->msg, use_arena ? &pa : NULL, err);
    xfree(joined);
    if (type == ZMQ_ROUTER) {                                       /* every message: who sent it (issue 38) */
        const char *addr = zmq_msg_gets(&f, "Peer-Address");
        if (addr) snprintf(out->peer_address, sizeof out->peer_address, "%s", addr);
        const char *user = zmq_msg_gets(&f, "User-Id");            /* the ZAP handler's key fingerprint (zap.h) */
        if (user) snprintf(out->peer_key, sizeof out->peer_key, "%s", user);
    }
    zmq_msg_close(&f);
    return rc;
}

int net_recv(void *sock, NetMsg *out, int timeout_ms, size_t max_bytes, char err[ERR_LEN]) {
    return recv_msg(sock, out, timeout_ms, max_bytes, 0, err);
}

int net_recv_arena(void *sock, NetMsg *out, int timeout_ms, size_t max_bytes, char err[ERR_LEN]) {
    return recv_msg(sock, out, timeout_ms, max_bytes, 1, err);
}

void net_unpacked_free(ProtobufCMessage *msg, NetArena *arena) {
    if (arena) net_arena_free(arena);
    else if (msg) protobuf_c_message_free_unpacked(msg, NULL);
}

void net_msg_free(NetMsg *m) {
    if (!m) return;
    net_unpacked_free(m->msg, m->arena);
    m->msg = NULL;
    m->arena = NULL;
}
