/* common/net/net.c: framing, bounded unpacking and socket helpers over libzmq. */
#include "net/net.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

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
    void *s = zmq_socket(ctx, type);
    if (!s) { err_set(err, ERR_IO, "zmq_socket: %s", zmq_strerror(zmq_errno())); return NULL; }
    int one = 1;
    if (zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxb, sizeof maxb) || zmq_setsockopt(s, ZMQ_LINGER, &o.linger_ms, sizeof(int)) ||
        (type == ZMQ_ROUTER && (zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one) ||
                                zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one))) ||
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

/* zmq_msg_init_data's free callback: the encoded frame handed over without a copy (runs on ZeroMQ's I/O thread;
 * xfree is thread-safe). */
static void frame_release(void *data, void *hint) {
    (void)hint;
    xfree(data);
}

int net_send(void *sock, const uint8_t *peer, size_t peer_len, Dapo__MsgType type, const ProtobufCMessage *m,
             bool dontwait) {
    size_t len;
    uint8_t *buf = net_encode(type, m, &len);
    if (!buf) return ERR_TOO_BIG;
    int flags = dontwait ? ZMQ_DONTWAIT : 0;
    int rc = 0;
    if (peer && zmq_send(sock, peer, peer_len, flags | ZMQ_SNDMORE) < 0) rc = -zmq_errno();
    if (!rc && len >= NET_ZEROCOPY_BYTES) {
        /* a large frame goes to ZeroMQ as it is (no second copy); ZeroMQ frees it, sent or not */
        zmq_msg_t f;
        if (zmq_msg_init_data(&f, buf, len, frame_release, NULL)) {
            rc = -zmq_errno();
            xfree(buf);
        } else if (zmq_msg_send(&f, sock, flags) < 0) {
            rc = -zmq_errno();
            zmq_msg_close(&f);
        }
        buf = NULL;
    } else if (!rc && zmq_send(sock, buf, len, flags) < 0) {
        rc = -zmq_errno();
    }
    xfree(buf);
    if (rc == -EAGAIN) return ERR_AGAIN;
    if (rc == -EHOSTUNREACH) return ERR_CLOSED;
    return rc;
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
    out->bytes = zmq_msg_size(&f);
    ProtobufCAllocator pa = {.alloc = arena_alloc, .free = arena_free_ptr};
    if (use_arena) {          /* room for the unpacked message in one block as a rule; more blocks when needed */
        size_t cap = 2 * out->bytes + 512;
        out->arena = arena_block(cap < ((size_t)64 << 10) ? cap : ((size_t)64 << 10));
        pa.allocator_data = out->arena;
    }
    int rc = decode(zmq_msg_data(&f), zmq_msg_size(&f), max_bytes, &out->type, &out->version, &out->msg,
                    use_arena ? &pa : NULL, err);
    if (type == ZMQ_ROUTER && out->type == DAPO__MSG_TYPE__MSG_HELLO) {
        const char *addr = zmq_msg_gets(&f, "Peer-Address");
        if (addr) snprintf(out->peer_address, sizeof out->peer_address, "%s", addr);
        const char *user = zmq_msg_gets(&f, "User-Id");            /* the ZAP handler's key fingerprint (zap.h) */
        if (user) snprintf(out->peer_key, sizeof out->peer_key, "%s", user);
    }
    int extra = zmq_msg_more(&f);
    zmq_msg_close(&f);
    if (extra) {
        drain_more(sock);
        if (!rc) {
            net_msg_free(out);
            rc = err_set(err, ERR_DECODE, "unexpected extra frames after a %s message", net_type_name(out->type));
        }
    }
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
