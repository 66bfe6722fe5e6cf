/* services/coordinator/http.c: the dashboard's HTTP server (see http.h). */
#include "http.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"

struct HttpServer {
    uv_tcp_t    tcp;
    HttpHandler handler;
    void       *ud;
    int         port;
    int         closing;
    struct HttpConn *conns;          /* open connections, for http_close */
};

typedef struct HttpConn {
    uv_tcp_t            tcp;          /* tcp.data = this; first member */
    struct HttpConn    *next, *prev;
    uv_write_t          wr;
    HttpServer         *srv;
    http_parser         parser;
    size_t              len;
    char                url[2048];
    char                auth[512];
    char                hdr_field[64];
    int                 in_auth;
    char               *body;
    size_t              body_len;
    int                 done;
    char               *out;          /* response bytes, alive until on_written */
} HttpConn;

static void on_conn_closed(uv_handle_t *h) {
    HttpConn *c = h->data;
    if (c->prev) c->prev->next = c->next; else c->srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c->body);
    free(c->out);
    free(c);
}

static int on_url(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    size_t have = strlen(c->url);
    if (have + n >= sizeof c->url) return 1;
    memcpy(c->url + have, at, n);
    c->url[have + n] = 0;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    snprintf(c->hdr_field, sizeof c->hdr_field, "%.*s", (int)n, at);
    c->in_auth = strcasecmp(c->hdr_field, "Authorization") == 0;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    if (c->in_auth) snprintf(c->auth, sizeof c->auth, "%.*s", (int)n, at);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    if (c->body_len + n > HTTP_MAX_REQUEST) return 1;
    char *b = realloc(c->body, c->body_len + n + 1);
    if (!b) return 1;
    c->body = b;
    memcpy(c->body + c->body_len, at, n);
    c->body_len += n;
    c->body[c->body_len] = 0;
    return 0;
}

static int on_message_complete(http_parser *p) {
    ((HttpConn *)p->data)->done = 1;
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url, .on_header_field = on_header_field, .on_header_value = on_header_value,
    .on_body = on_body, .on_message_complete = on_message_complete,
};

static void on_written(uv_write_t *w, int status) {
    HttpConn *c = w->data;
    if (status < 0) log_debug("dashboard write: %s", uv_strerror(status));
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static const char *status_text(int s) {
    switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 503: return "Service Unavailable";
    default: return s < 400 ? "OK" : "Error";
    }
}

static void respond(HttpConn *c, HttpResponse *r) {
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n"
                      "Cache-Control: no-store\r\n%s\r\n",
                      r->status, status_text(r->status), r->content_type ? r->content_type : "text/plain",
                      r->body_len, r->status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
    c->out = malloc((size_t)hn + r->body_len);
    if (!c->out) { xfree(r->body); uv_close((uv_handle_t *)&c->tcp, on_conn_closed); return; }
    memcpy(c->out, head, (size_t)hn);
    if (r->body_len) memcpy(c->out + hn, r->body, r->body_len);
    xfree(r->body);
    uv_buf_t b = uv_buf_init(c->out, (unsigned)(hn + r->body_len));
    c->wr.data = c;
    uv_read_stop((uv_stream_t *)&c->tcp);
    int rc = uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);   /* the write callback never fires */
}

void http_reply(HttpResponse *resp, int status, const char *content_type, const char *text) {
    resp->status = status;
    resp->content_type = content_type;
    resp->body_len = strlen(text);
    resp->body = xmalloc(resp->body_len + 1);
    memcpy(resp->body, text, resp->body_len + 1);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    HttpConn *c = s->data;
    if (nread < 0) {
        free(buf->base);
        if (!uv_is_closing((uv_handle_t *)s)) uv_close((uv_handle_t *)s, on_conn_closed);
        return;
    }
    c->len += (size_t)nread;
    size_t used = http_parser_execute(&c->parser, &settings, buf->base, (size_t)nread);
    free(buf->base);
    HttpResponse r = {0};
    if (c->parser.http_errno || used != (size_t)nread || c->len > HTTP_MAX_REQUEST) {
        int too_big = c->len > HTTP_MAX_REQUEST || c->body_len >= HTTP_MAX_REQUEST;
        http_reply(&r, too_big ? 413 : 400, "text/plain", too_big ? "request too large\n" : "malformed request\n");
        respond(c, &r);
        return;
    }
    if (!c->done) return;
    char *q = strchr(c->url, '?');
    if (q) *q++ = 0;
    HttpRequest req = {
        .method = http_method_str((enum http_method)c->parser.method), .path = c->url, .query = q ? q : "",
        .authorization = c->auth, .body = c->body ? c->body : "", .body_len = c->body_len,
    };
    c->srv->handler(c->srv->ud, &req, &r);
    respond(c, &r);
}

static void on_connection(uv_stream_t *server, int status) {
    HttpServer *srv = server->data;
    if (status < 0) { log_warn("dashboard accept: %s", uv_strerror(status)); return; }
    HttpConn *c = calloc(1, sizeof *c);
    if (!c) return;
    c->srv = srv;
    uv_tcp_init(server->loop, &c->tcp);
    c->tcp.data = c;
    c->next = srv->conns;
    if (srv->conns) srv->conns->prev = c;
    srv->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp)) { uv_close((uv_handle_t *)&c->tcp, on_conn_closed); return; }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

HttpServer *http_listen(uv_loop_t *loop, const char *hostport, HttpHandler h, void *ud, char err[ERR_LEN]) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host) {
        err_set(err, ERR_INVAL, "cluster.http: '%s' is not host:port", hostport);
        return NULL;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535) {
        err_set(err, ERR_INVAL, "cluster.http: '%s' has a bad port", hostport);
        return NULL;
    }
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&addr) &&
        uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&addr)) {
        err_set(err, ERR_INVAL, "cluster.http: '%s' is not an IP address", host);
        return NULL;
    }
    HttpServer *s = xcalloc(1, sizeof *s);
    s->handler = h;
    s->ud = ud;
    uv_tcp_init(loop, &s->tcp);
    s->tcp.data = s;
    int rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&addr, 0);
    if (!rc) rc = uv_listen((uv_stream_t *)&s->tcp, 128, on_connection);
    if (rc) {
        err_set(err, ERR_IO, "dashboard cannot listen on %s: %s", hostport, uv_strerror(rc));
        s->closing = 1;
        uv_close((uv_handle_t *)&s->tcp, (uv_close_cb)xfree);
        return NULL;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&bound, &blen);
    s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    return s;
}

int http_port(const HttpServer *s) { return s->port; }

void http_close(HttpServer *s) {
    if (!s || s->closing) return;
    s->closing = 1;
    for (HttpConn *c = s->conns; c; c = c->next)
        if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    uv_close((uv_handle_t *)&s->tcp, (uv_close_cb)xfree);
}
