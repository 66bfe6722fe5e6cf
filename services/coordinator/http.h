/* services/coordinator/http.h: a small HTTP/1.1 server on the coordinator's libuv loop (http-parser does the
 * parsing). One request per connection (Connection: close), request line + headers + body capped at
 * HTTP_MAX_REQUEST bytes; the handler fills a response that is written and freed in the write callback.
 * Not here: the routes (dashboard.c). */
#ifndef DAPO_COORD_HTTP_H
#define DAPO_COORD_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "core/err.h"

#define HTTP_MAX_REQUEST (1 << 20)

typedef struct {
    const char *method;          /* "GET", "POST", ... */
    const char *path;            /* URL path, without the query */
    const char *query;           /* after '?', or "" */
    const char *authorization;   /* the Authorization header, or "" */
    const char *body;            /* NUL-terminated; body_len bytes */
    size_t      body_len;
} HttpRequest;

typedef struct {
    int         status;          /* 200, 404, ... */
    const char *content_type;    /* static string */
    char       *body;            /* xmalloc'd, owned by the server after the handler returns */
    size_t      body_len;
} HttpResponse;

typedef void (*HttpHandler)(void *ud, const HttpRequest *req, HttpResponse *resp);

typedef struct HttpServer HttpServer;

/* Listens on "host:port" (port 0: ephemeral) on loop. Returns NULL with a message on failure. */
HttpServer *http_listen(uv_loop_t *loop, const char *hostport, HttpHandler h, void *ud, char err[ERR_LEN]);
/* The bound port (useful with port 0). */
int http_port(const HttpServer *s);
/* Stops listening and closes open connections; memory is freed in close callbacks (run the loop to finish). */
void http_close(HttpServer *s);
/* Sets resp to a body copied from text. */
void http_reply(HttpResponse *resp, int status, const char *content_type, const char *text);

#endif
