/* services/coordinator/http.h: a small HTTP/1.1 server on the coordinator's libuv loop. The parsing is done by
 * http-parser (Debian libhttp-parser, the Node.js parser): request line, headers (Authorization is kept),
 * chunked or Content-Length bodies, and the URL split by http_parser_parse_url.
 * One request per connection (the response says `Connection: close`); the handler runs on the loop thread and
 * fills an HttpResponse that the server writes and frees.
 * Limits against untrusted peers: body <= HTTP_MAX_REQUEST bytes (a larger Content-Length gets 413 before the
 * body is read; a chunked body is cut off with 413 once it passes the limit), URL <= HTTP_MAX_URL bytes (414),
 * headers <= 80 KiB (http-parser's HTTP_MAX_HEADER_SIZE; 431), at most HTTP_MAX_CONNS open connections (a new
 * one closes the oldest that is still sending its request), the whole request within HTTP_IDLE_MS of the connection (else closed), and a connection
 * idle for HTTP_IDLE_MS while answering is closed. Malformed requests get 400. After an error answer the rest of
 * the request is read and dropped (up to HTTP_DRAIN_MAX bytes) so the client sees the answer instead of a
 * connection reset. HEAD gets the handler's answer without its body.
 * Not here: keep-alive and pipelining, TLS, the routes (dashboard.c). */
#ifndef DAPO_COORD_HTTP_H
#define DAPO_COORD_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "core/err.h"

#define HTTP_MAX_REQUEST (1 << 20)     /* bytes of request body */
#define HTTP_MAX_URL     4096          /* bytes */
#define HTTP_MAX_CONNS   256
#define HTTP_IDLE_MS     10000         /* ms */
#define HTTP_DRAIN_MAX   (16 << 20)    /* bytes read and dropped after an error answer */

typedef struct {
    const char *method;          /* "GET", "POST", ... (static strings of http-parser) */
    const char *path;            /* URL path ("/api/status"), without the query; never NULL */
    const char *query;           /* the text after '?' (not decoded), or "" */
    const char *authorization;   /* the Authorization header's value, or "" (also "" when longer than 511 bytes) */
    const char *body;            /* NUL-terminated; body_len bytes (may hold NULs) */
    size_t      body_len;
} HttpRequest;

/* Runs once the response has been written (or the write failed), with the connection already closing:
 * for actions that tear the server down (e.g. stop), which must not run inside the handler. */
typedef void (*HttpAfter)(void *ud);

typedef struct {
    int         status;          /* 200, 404, ... */
    const char *content_type;    /* static string; NULL: text/plain; charset=utf-8 */
    char       *body;            /* xmalloc'd, owned by the server after the handler returns (may be NULL if 0 bytes) */
    size_t      body_len;
    const char *extra_headers;   /* static string of "Name: value\r\n" lines, or NULL */
    HttpAfter   after;           /* optional, with after_ud */
    void       *after_ud;
} HttpResponse;

/* The request handler: req and everything it points to is borrowed for the call; fill resp (status 0 is
 * answered 500). Runs on the loop thread. */
typedef void (*HttpHandler)(void *ud, const HttpRequest *req, HttpResponse *resp);

typedef struct HttpServer HttpServer;

/* Listens on "host:port" (IPv4 "127.0.0.1:8080" or IPv6 "[::1]:8080" / "::1:8080"; port 0: ephemeral) on loop.
 * Returns the server (owned; end it with http_close) or NULL with ERR_INVAL (bad address) / ERR_IO (bind,
 * listen) in err. */
HttpServer *http_listen(uv_loop_t *loop, const char *hostport, HttpHandler h, void *ud, char err[ERR_LEN]);
/* The bound port (useful with port 0). */
int http_port(const HttpServer *s);
/* Stops listening and closes open connections (responses not yet written are dropped); memory is freed in the
 * close callbacks (run the loop to finish). NULL-safe; a second call does nothing. Safe from inside a handler
 * or an HttpAfter callback. */
void http_close(HttpServer *s);
/* Sets resp to status, content_type and a body copied from text (NUL-terminated). */
void http_reply(HttpResponse *resp, int status, const char *content_type, const char *text);
/* As http_reply with n bytes of data (may hold NULs). */
void http_reply_bytes(HttpResponse *resp, int status, const char *content_type, const void *data, size_t n);
/* Takes ownership of body (xmalloc'd, n bytes). */
void http_reply_owned(HttpResponse *resp, int status, const char *content_type, char *body, size_t n);

#endif
