/* tests/fuzz/fuzz_http.c: libFuzzer target for the coordinator's HTTP request path (services/coordinator/http.c on
 * http-parser and libuv) on arbitrary request bytes: request line, headers, chunked and Content-Length bodies, URLs,
 * the limits (413, 414, 431), garbage. Each input goes over a real loopback connection to a server on a libuv loop in
 * this process; the client half-closes, the loop runs until the server closes the connection (at most 2 s). A handler
 * that runs sees a method, a path, a body within HTTP_MAX_REQUEST and NUL-terminated; every answer starts with an HTTP
 * status line. Not here: the routes (tests/integration/test_dashboard.c). */
// fuzz-sources: services/coordinator/http.c common/core/err.c common/core/log.c -lhttp_parser
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "services/coordinator/http.h"

static uv_loop_t *g_loop;
static HttpServer *g_srv;
static int g_port;

#define check(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_http: %s failed (line %d)\n", #cond, __LINE__); \
                                          abort(); } } while (0)

static void handler(void *ud, const HttpRequest *req, HttpResponse *resp) {
    (void)ud;
    check(req->method && req->path && req->query && req->authorization && req->body);
    check(req->body_len <= HTTP_MAX_REQUEST && req->body[req->body_len] == 0);
    check(strlen(req->authorization) < 512);
    http_reply(resp, 200, NULL, req->path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    log_init("fuzz", LL_ERROR);
    char err[ERR_LEN];
    g_loop = uv_loop_new();
    g_srv = http_listen(g_loop, "127.0.0.1:0", handler, NULL, err);
    if (!g_srv) { fprintf(stderr, "fuzz_http: %s\n", err); abort(); }
    g_port = http_port(g_srv);
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (64 << 10)) return 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0) return 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {      /* the machine's limits (a full backlog), not the server */
        close(fd);
        uv_run(g_loop, UV_RUN_NOWAIT);
        return 0;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t sent = 0, got = 0;
    char head[16];
    int closed = 0, shut = 0;
    for (double end = now_s() + 2.0; !closed && now_s() < end;) {
        if (sent < size) {
            ssize_t k = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
            if (k > 0) sent += (size_t)k;
            else if (k < 0 && errno != EAGAIN) sent = size;          /* the server closed early (an error answer) */
        }
        if (sent == size && !shut) { shutdown(fd, SHUT_WR); shut = 1; }
        uv_run(g_loop, UV_RUN_NOWAIT);
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r > 0) {
            for (ssize_t i = 0; i < r && got < sizeof head; i++) head[got++] = buf[i];
        } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            closed = 1;
        }
    }
    if (got >= 9) check(!memcmp(head, "HTTP/1.1 ", 9));           /* any answer is an HTTP response */
    close(fd);
    for (int i = 0; i < 4; i++) uv_run(g_loop, UV_RUN_NOWAIT);      /* the server's side of the close */
    return 0;
}
