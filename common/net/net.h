/* common/net/net.h: the thin layer over libzmq that every dapo process speaks (docs/design.md §1).
 *
 * A message is one ZeroMQ frame, or on a CURVE socket several when it is over NET_FRAME_BYTES (ROUTER sockets add
 * the peer's routing-id frame in front):
 *   bytes 0..3   magic "DAPO"
 *   bytes 4..5   protocol version (u16 LE)  -- DAPO_PROTOCOL_VERSION
 *   bytes 6..7   MsgType (u16 LE)           -- proto/dapo.proto
 *   bytes 8..11  payload length (u32 LE)    -- must equal message size - 12
 *   bytes 12..   protobuf payload of the message type
 * Over CURVE, a message of more than NET_FRAME_BYTES travels as consecutive frames of NET_FRAME_BYTES (the last one
 * shorter) of one multipart message, which the receiver joins before it decodes: CURVE encrypts frame by frame, and
 * libzmq spends ~1.3x as much CPU per byte on a 27 MB frame as on 1 MiB ones; in plaintext one frame is cheaper (no
 * join). Receivers accept either form (bench/RESULTS.md, issue 18).
 * Frames are size-capped twice: ZMQ_MAXMSGSIZE on every socket (the peer is disconnected) and a check before
 * protobuf-c unpacks anything (docs/conventions.md rule 11). Hello, Welcome and ErrorReply are frozen across protocol
 * versions: they are unpacked even from a peer of another version (net_decode still returns ERR_VERSION), so a
 * refusal can name both versions. Truncated, oversized, garbage frames and frames of another
 * protocol version are consumed and reported as errors; the receiver keeps working.
 * Not here: the worker state machine (worker.h), the coordinator's registry (services/coordinator). */
#ifndef DAPO_NET_H
#define DAPO_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "dapo.pb-c.h"
#include "net/curve.h"

#define DAPO_PROTOCOL_VERSION 6           /* 2: messages over NET_FRAME_BYTES in several frames; 3: StepResult and
                                           * Control carry an error code; 4: Hello carries the worker's run keys,
                                           * Welcome the coordinator's config and its hash; 5: Hello.config_only (a
                                           * worker takes its run keys from the coordinator before it loads); 6:
                                           * Response.token_versions (partial rollouts) */
#define NET_HEADER_BYTES      12
#define NET_FRAME_BYTES       ((size_t)1 << 20)
#define NET_PEER_MAX          255     /* ZeroMQ routing ids are at most 255 bytes */

/* An arena that holds every allocation of one unpacked message (net_recv_arena): freed at once, never piecewise. */
typedef struct NetArena NetArena;

/* One received message. `msg` is the unpacked protobuf (cast by type, e.g. (Dapo__Hello *)m.msg), owned by the
 * NetMsg and freed by net_msg_free (with its arena, when it came from net_recv_arena). A caller that keeps msg
 * past net_msg_free takes msg and arena both (setting them NULL in the NetMsg) and frees them later with
 * net_unpacked_free. peer/peer_len: routing id of the sender (ROUTER sockets only). On a ROUTER socket every message
 * carries its connection's peer_address and, with CURVE, peer_key (two metadata lookups per message): a server
 * attributes each message to the key that sent it, not to the routing id alone (issue 38). */
typedef struct {
    Dapo__MsgType     type;
    ProtobufCMessage *msg;
    uint16_t          version;        /* protocol version in the header */
    size_t            bytes;          /* frame size, header included */
    uint8_t           peer[NET_PEER_MAX];
    size_t            peer_len;
    NetArena         *arena;          /* net_recv_arena: msg's memory; NULL: msg is protobuf-c's malloc'd tree */
    char              peer_address[64];  /* ROUTER: ZeroMQ's "Peer-Address" property (the peer's IP for TCP); ""
                                          * where ZeroMQ has none (ipc, inproc) or for other socket types */
    char              peer_key[160];     /* ROUTER, CURVE: "NAME FINGERPRINT" of the sending connection's client key
                                          * (zap.h); "" without CURVE */
} NetMsg;

/* Socket options for net_socket. Zero-initialised fields take the defaults in brackets. */
typedef struct {
    int64_t     max_msg_bytes;        /* ZMQ_MAXMSGSIZE and the unpack cap [256 MiB] */
    int         linger_ms;            /* ZMQ_LINGER [0] */
    const char *routing_id;           /* ZMQ_ROUTING_ID for DEALERs [none: the ROUTER assigns one per connection,
                                         which no client can choose: dapo's workers leave it so] */
    int         heartbeat_ms;         /* ZMTP heartbeats: ZMQ_HEARTBEAT_IVL [0: none] ... */
    int         heartbeat_timeout_ms; /* ... and ZMQ_HEARTBEAT_TIMEOUT: a silent connection is closed after it */
    bool        bind;                 /* bind instead of connect */
    const CurveKeys *curve;           /* CURVE keys (net/curve.h; borrowed for the call) [NULL: plaintext] */
    bool        curve_server;         /* with curve: this socket is the CURVE server (else a client) */
} NetOpts;

/* Creates a ZeroMQ socket of `type` (ZMQ_ROUTER, ZMQ_DEALER, ...) on ctx and binds/connects it to endpoint.
 * ROUTER sockets get ZMQ_ROUTER_MANDATORY (sends to a vanished peer fail with EHOSTUNREACH instead of vanishing) and
 * no ZMQ_ROUTER_HANDOVER: a second connection claiming a routing id in use gets nothing and displaces nobody (a client
 * holding any authorized key could otherwise take over another worker's connection; issue 38).
 * Returns the socket (caller closes with zmq_close) or NULL with a message naming the endpoint. */
void *net_socket(void *ctx, int type, const char *endpoint, const NetOpts *opts, char err[ERR_LEN]);

/* A new socket in place of *sock (net_socket with the same arguments; the old one closed at once, what it had
 * queued dropped): libzmq does not retry a connection whose CURVE handshake was refused, so a client whose key was
 * missing from the allow-list for a while reopens to get in once it is back. 0, or the error with *sock unchanged. */
int net_socket_reopen(void **sock, void *ctx, int type, const char *endpoint, const NetOpts *opts, char err[ERR_LEN]);

/* The endpoint actually bound (resolves "tcp://127.0.0.1:0" to the ephemeral port) into buf. 0 or ERR_IO. */
int net_last_endpoint(void *sock, char *buf, size_t len);

/* Packs `m` (a message whose descriptor matches `type`) behind a header and sends it (net_send_frames), preceded by
 * the routing id `peer` when peer != NULL (ROUTER). Non-blocking when dontwait. Returns 0, ERR_AGAIN (would
 * block), ERR_CLOSED (ROUTER: peer gone), ERR_TOO_BIG, or -errno. */
#define NET_ZEROCOPY_BYTES 4096
int net_send(void *sock, const uint8_t *peer, size_t peer_len, Dapo__MsgType type, const ProtobufCMessage *m,
             bool dontwait);

/* Sends the encoded message buf[0, len) (header included), preceded by the routing id `peer` when peer != NULL, as
 * one frame or, on a CURVE socket and over NET_FRAME_BYTES, as frames of NET_FRAME_BYTES. Ownership of buf passes
 * to this call, which calls release(buf, hint) once it is no longer needed: messages of NET_ZEROCOPY_BYTES or more go
 * to ZeroMQ without a copy and are released when ZeroMQ is done with every frame (on its I/O thread, or here when
 * sending fails); smaller ones are copied and released here. flags: 0 or ZMQ_DONTWAIT. Returns 0, ERR_AGAIN,
 * ERR_CLOSED or -errno; buf is released whatever happens. */
int net_send_frames(void *sock, const uint8_t *peer, size_t peer_len, uint8_t *buf, size_t len, int flags,
                    void (*release)(void *buf, void *hint), void *hint);

/* Receives one message (all its frames). timeout_ms: 0 = non-blocking, <0 = wait forever, else wait at most that
 * long. Returns 0 and fills *out; ERR_AGAIN/ERR_TIMEOUT when nothing arrived; on a bad frame (ERR_DECODE,
 * ERR_TOO_BIG, ERR_VERSION) the frame is consumed, out->type/version/peer are filled as far as known, err says
 * what was wrong, and the caller may answer with an ErrorReply. max_bytes: unpack cap (0: 256 MiB). */
int net_recv(void *sock, NetMsg *out, int timeout_ms, size_t max_bytes, char err[ERR_LEN]);

/* As net_recv, but the message is unpacked into one arena (out->arena: a few blocks instead of a malloc per field
 * and per repeated array; protobuf-c's ProtobufCAllocator). For hot receive loops (the coordinator's). */
int net_recv_arena(void *sock, NetMsg *out, int timeout_ms, size_t max_bytes, char err[ERR_LEN]);

/* Frees the unpacked message; the NetMsg can be reused. NULL-safe. */
void net_msg_free(NetMsg *m);

/* Frees a message taken out of a NetMsg: its arena when it has one, else protobuf-c's tree. NULL-safe. */
void net_unpacked_free(ProtobufCMessage *msg, NetArena *arena);
void net_arena_free(NetArena *a);

/* Pure framing, used by net_send/net_recv and the tests: encode into a new xmalloc'd buffer (caller xfrees),
 * and decode a frame (the payload is unpacked; *msg owned by caller, free with protobuf_c_message_free_unpacked). */
uint8_t *net_encode(Dapo__MsgType type, const ProtobufCMessage *m, size_t *len);
int net_decode(const uint8_t *buf, size_t len, size_t max_bytes, Dapo__MsgType *type, uint16_t *version,
               ProtobufCMessage **msg, char err[ERR_LEN]);

/* Writes the frame of `m` (header + protobuf) into buf, which holds at least NET_HEADER_BYTES + packed bytes, where
 * packed = protobuf_c_message_get_packed_size(m) (<= UINT32_MAX; 0 for m == NULL). Returns the frame length. For
 * senders that reuse their buffers (the coordinator's zero-copy TrainBatch sends). */
size_t net_encode_into(Dapo__MsgType type, const ProtobufCMessage *m, size_t packed, uint8_t *buf);

/* The protobuf descriptor of a MsgType, or NULL for an unknown type. */
const ProtobufCMessageDescriptor *net_descriptor(Dapo__MsgType type);
/* Short name of a MsgType ("hello", "group_result", ...) for logs. */
const char *net_type_name(Dapo__MsgType type);

#endif
