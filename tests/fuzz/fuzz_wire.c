/* tests/fuzz/fuzz_wire.c: libFuzzer target for the wire decoder (common/net/net.c net_decode) on arbitrary frames:
 * the 12-byte header (magic, protocol version, type, payload length) and every message type's protobuf payload.
 * Byte 0 picks the type (mod 19) and the rest is a payload, framed with a valid header, so every type's unpacking
 * is reached; inputs over 256 bytes are also decoded as they are (a raw frame, header included). A frame that
 * decodes must encode again (net_encode) to a frame that decodes to the same type and the same bytes.
 * Not here: the coordinator's handling of decoded messages (tests/integration/test_coordinator.c). */
// fuzz-sources: common/net/net.c common/net/curve.c build/gen/dapo.pb-c.c common/core/err.c common/core/log.c common/core/fsutil.c common/core/rng.c
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

static void check(int cond) {
    if (!cond) abort();
}

/* Decodes buf; when it decodes, re-encodes it and checks the round trip. */
static void one(const uint8_t *buf, size_t len) {
    Dapo__MsgType type;
    uint16_t version;
    ProtobufCMessage *msg = NULL;
    char err[ERR_LEN];
    if (net_decode(buf, len, 1 << 20, &type, &version, &msg, err) != 0) {
        if (msg) protobuf_c_message_free_unpacked(msg, NULL);     /* a Hello of another version comes unpacked */
        return;
    }
    size_t n1;
    uint8_t *a = net_encode(type, msg, &n1);
    check(a != NULL);
    Dapo__MsgType t2;
    ProtobufCMessage *m2 = NULL;
    /* protobuf-c's unpack keeps an unknown field numbered 0 when its tag is a non-minimal varint (80 00) and packs
     * it back minimal (00), which its unpack then refuses: the re-encoded frame need not decode, but one that does
     * is the same message, and encodes to the same bytes again */
    if (net_decode(a, n1, 1 << 20, &t2, &version, &m2, err) == 0) {
        check(t2 == type);
        size_t n2;
        uint8_t *b = net_encode(t2, m2, &n2);
        check(b && n2 == n1 && !memcmp(a, b, n1));
        xfree(b);
        protobuf_c_message_free_unpacked(m2, NULL);
    }
    xfree(a);
    protobuf_c_message_free_unpacked(msg, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1 << 16)) return 0;
    size_t plen = size - 1;
    uint8_t *f = malloc(NET_HEADER_BYTES + plen + 1);
    memcpy(f, "DAPO", 4);
    f[4] = (uint8_t)(DAPO_PROTOCOL_VERSION & 0xff);
    f[5] = (uint8_t)(DAPO_PROTOCOL_VERSION >> 8);
    uint16_t type = (uint16_t)(data[0] % 19);
    f[6] = (uint8_t)(type & 0xff);
    f[7] = (uint8_t)(type >> 8);
    uint32_t pl = (uint32_t)plen;
    for (int i = 0; i < 4; i++) f[8 + i] = (uint8_t)(pl >> (8 * i));
    memcpy(f + NET_HEADER_BYTES, data + 1, plen);
    one(f, NET_HEADER_BYTES + plen);
    free(f);
    if (size > 256) one(data, size);                   /* the bytes as a whole frame */
    return 0;
}
