/* services/coordinator/http.c: the dashboard's HTTP/1.1 server on libuv, parsing with http-parser (see http.h
 * for the limits and what is left out).
 * Lifetimes (libuv rules): a connection is freed only in its close callback; the server is freed once its
 * listening socket, its sweep timer and every connection have been closed. A connection goes READING ->
 * WRITING (request complete, handler ran) -> closed, or READING -> DRAINING (error answer being written while
 * the rest of the request is read and dropped; write side shut down after the answer) -> closed at EOF. */
#include "http.h"

#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/log.h"

typedef enum { CONN_READING = 0, CONN_WRITING, CONN_DRAINING } ConnPhase;

struct HttpServer {
    uv_tcp_t         tcp;
    uv_timer_t       sweep;          /* closes idle connections */
    HttpHandler      handler;
    void            *ud;
    int              port;
    int              closing;
    int              handles_open;   /* tcp + sweep, until their close callbacks ran */
    int              nconns;
    struct HttpConn *conns;          /* open connections (also those closing) */
};

typedef struct HttpConn {
    uv_tcp_t         tcp;            /* tcp.data = this */
    struct HttpConn *next, *prev;
    HttpServer      *srv;
    uv_write_t       wr;
    uv_shutdown_t    sd;
    http_parser      parser;
    ConnPhase        phase;
    int64_t          start_ms;       /* accepted (monotonic): the whole request must arrive within HTTP_IDLE_MS */
    int64_t          last_ms;        /* last read or write activity (monotonic) */
    size_t           len;            /* bytes dropped (DRAINING) */
    int              head;           /* a HEAD request: the answer has no body */
    char             url[HTTP_MAX_URL + 1];
    size_t           url_len;
    char             field[32];      /* the current header name (truncated: we only match short names) */
    size_t           field_len;
    int              in_value;       /* the last callback was a header value */
    int              is_auth;        /* the current header is Authorization */
    char             auth[512];
    size_t           auth_len;
    int              auth_overflow;
    char            *body;           /* xmalloc'd */
    size_t           body_len, body_cap;
    int              done, too_big, url_too_long;
    char            *out;            /* response bytes, alive until the write callback */
    HttpAfter        after;
    void            *after_ud;
    char             rbuf[16384];
} HttpConn;

static void srv_maybe_free(HttpServer *s) {
    if (s->closing && s->handles_open == 0 && s->nconns == 0) xfree(s);
}

static void on_srv_handle_closed(uv_handle_t *h) {
    HttpServer *s = h->data;
    s->handles_open--;
    srv_maybe_free(s);
}

static void on_conn_closed(uv_handle_t *h) {
    HttpConn *c = h->data;
    HttpServer *s = c->srv;
    if (c->prev) c->prev->next = c->next; else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    xfree(c->body);
    xfree(c->out);
    xfree(c);
    srv_maybe_free(s);
}

static void conn_close(HttpConn *c) {
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* ------------------------------------------------------------------------------------------ parser callbacks */

static int on_url(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    if (n > HTTP_MAX_URL - c->url_len) { c->url_too_long = 1; return 1; }
    memcpy(c->url + c->url_len, at, n);
    c->url_len += n;
    c->url[c->url_len] = 0;
    return 0;
}

/* Header names and values may arrive in several pieces (one per read); a name starts after a value. */
static int on_header_field(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    if (c->in_value) { c->field_len = 0; c->in_value = 0; }
    size_t room = sizeof c->field - 1 - c->field_len;
    size_t k = n < room ? n : room;
    memcpy(c->field + c->field_len, at, k);
    c->field_len += k;
    c->field[c->field_len] = 0;
    if (n > room) c->field[0] = '#';                 /* too long to be a name we know */
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    if (!c->in_value) {
        c->in_value = 1;
        c->is_auth = strcasecmp(c->field, "Authorization") == 0;
        if (c->is_auth) { c->auth_len = 0; c->auth_overflow = c->auth[0] != 0; }   /* a second one: refuse */
    }
    if (!c->is_auth) return 0;
    if (n > sizeof c->auth - 1 - c->auth_len) { c->auth_overflow = 1; return 0; }
    memcpy(c->auth + c->auth_len, at, n);
    c->auth_len += n;
    c->auth[c->auth_len] = 0;
    return 0;
}

static int on_headers_complete(http_parser *p) {
    HttpConn *c = p->data;
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > (uint64_t)HTTP_MAX_REQUEST) {
        c->too_big = 1;                              /* answer 413 before reading the body */
        return -1;
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
    HttpConn *c = p->data;
    if (n > HTTP_MAX_REQUEST - c->body_len) { c->too_big = 1; return 1; }
    if (c->body_len + n + 1 > c->body_cap) {
        size_t cap = c->body_cap ? 2 * c->body_cap : 4096;
        while (cap < c->body_len + n + 1) cap *= 2;
        c->body = xrealloc(c->body, cap);
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, at, n);
    c->body_len += n;
    c->body[c->body_len] = 0;
    return 0;
}

static int on_message_complete(http_parser *p) {
    ((HttpConn *)p->data)->done = 1;
    http_parser_pause(p, 1);                         /* one request per connection: ignore what follows */
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url, .on_header_field = on_header_field, .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete, .on_body = on_body, .on_message_complete = on_message_complete,
};

/* ------------------------------------------------------------------------------------------ responses */

static const char *status_text(int s) {
    switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return s < 400 ? "OK" : "Error";
    }
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    (void)req; (void)status;                         /* DRAINING: reading goes on until EOF */
}

static void on_written(uv_write_t *w, int status) {
    HttpConn *c = w->data;
    c->last_ms = clock_ms();
    xfree(c->out);
    c->out = NULL;
    if (status < 0) log_debug("dashboard write: %s", uv_strerror(status));
    if (c->phase == CONN_DRAINING && status == 0 && !uv_is_closing((uv_handle_t *)&c->tcp)) {
        c->sd.data = c;
        if (uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, on_shutdown)) conn_close(c);
    } else {
        conn_close(c);
    }
    if (c->after) {
        HttpAfter after = c->after;
        c->after = NULL;
        after(c->after_ud);                          /* may close the whole server */
    }
}

/* Writes r (taking its body). drain: keep reading and dropping the rest of the request (error answers). */
static void respond(HttpConn *c, HttpResponse *r, int drain) {
    if (uv_is_closing((uv_handle_t *)&c->tcp) || c->srv->closing) {   /* closed under the handler's feet */
        xfree(r->body);
        return;
    }
    if (r->status == 0) { xfree(r->body); http_reply(r, 500, NULL, "the handler gave no answer\n"); }
    const char *ct = r->content_type ? r->content_type : "text/plain; charset=utf-8";
    const char *extra = r->extra_headers ? r->extra_headers : "";
    const char *fmt = "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n"
                      "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n%s%s\r\n";
    const char *www = r->status == 401 ? "WWW-Authenticate: Bearer\r\n" : "";
    int hn = snprintf(NULL, 0, fmt, r->status, status_text(r->status), ct, r->body_len, www, extra);
    size_t body_len = c->head ? 0 : r->body_len;    /* HEAD: the headers of the GET answer, no body */
    c->out = xmalloc((size_t)hn + 1 + r->body_len);
    snprintf(c->out, (size_t)hn + 1, fmt, r->status, status_text(r->status), ct, r->body_len, www, extra);
    if (body_len) memcpy(c->out + hn, r->body, body_len);
    xfree(r->body);
    r->body = NULL;
    c->after = r->after;
    c->after_ud = r->after_ud;
    c->phase = drain ? CONN_DRAINING : CONN_WRITING;
    c->len = 0;
    if (!drain) uv_read_stop((uv_stream_t *)&c->tcp);
    uv_buf_t b = uv_buf_init(c->out, (unsigned)((size_t)hn + body_len));
    c->wr.data = c;
    int rc = uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc) {                                        /* the write callback never fires */
        log_debug("dashboard write: %s", uv_strerror(rc));
        conn_close(c);
        if (c->after) c->after(c->after_ud);
        c->after = NULL;
    }
}

void http_reply_owned(HttpResponse *resp, int status, const char *content_type, char *body, size_t n) {
    resp->status = status;
    resp->content_type = content_type;
    resp->body = body;
    resp->body_len = n;
}

void http_reply_bytes(HttpResponse *resp, int status, const char *content_type, const void *data, size_t n) {
    char *b = xmalloc(n + 1);
    if (n) memcpy(b, data, n);
    b[n] = 0;
    http_reply_owned(resp, status, content_type, b, n);
}

void http_reply(HttpResponse *resp, int status, const char *content_type, const char *text) {
    http_reply_bytes(resp, status, content_type, text, strlen(text));
}

/* ------------------------------------------------------------------------------------------ reading */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    HttpConn *c = h->data;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void dispatch(HttpConn *c) {
    HttpResponse r = {0};
    struct http_parser_url u;
    http_parser_url_init(&u);
    int connect = c->parser.method == HTTP_CONNECT;
    if (http_parser_parse_url(c->url, c->url_len, connect, &u) || !(u.field_set & (1 << UF_PATH))) {
        http_reply(&r, 400, NULL, "malformed request: bad URL\n");
        respond(c, &r, 0);
        return;
    }
    /* Path and query are cut out of c->url in place (the query follows the path, so terminate it last). */
    char path[HTTP_MAX_URL + 1], query[HTTP_MAX_URL + 1] = "";
    memcpy(path, c->url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
    path[u.field_data[UF_PATH].len] = 0;
    if (u.field_set & (1 << UF_QUERY)) {
        memcpy(query, c->url + u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
        query[u.field_data[UF_QUERY].len] = 0;
    }
    c->head = c->parser.method == HTTP_HEAD;
    HttpRequest req = {
        .method = http_method_str((enum http_method)c->parser.method), .path = path, .query = query,
        .authorization = c->auth_overflow ? "" : c->auth, .body = c->body ? c->body : "", .body_len = c->body_len,
    };
    c->srv->handler(c->srv->ud, &req, &r);
    respond(c, &r, 0);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    HttpConn *c = s->data;
    if (nread < 0) { conn_close(c); return; }         /* EOF or error (also: a client gone mid-request) */
    if (nread == 0) return;                          /* EAGAIN; an empty execute would mean EOF to http-parser */
    c->last_ms = clock_ms();
    if (c->phase == CONN_DRAINING) {
        c->len += (size_t)nread;
        if (c->len > HTTP_DRAIN_MAX) conn_close(c);
        return;
    }
    if (c->phase != CONN_READING) return;
    size_t used = http_parser_execute(&c->parser, &settings, buf->base, (size_t)nread);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    HttpResponse r = {0};
    if (c->done) { dispatch(c); return; }
    if (c->too_big) {
        http_reply(&r, 413, NULL, "request too large (the limit is 1 MiB)\n");
    } else if (c->url_too_long) {
        http_reply(&r, 414, NULL, "URL too long\n");
    } else if (e == HPE_HEADER_OVERFLOW) {
        http_reply(&r, 431, NULL, "request headers too large\n");
    } else if (e != HPE_OK || used != (size_t)nread || c->parser.upgrade) {
        char msg[160];
        snprintf(msg, sizeof msg, "malformed request: %s\n",
                 c->parser.upgrade ? "protocol upgrades are not supported" : http_errno_description(e));
        http_reply(&r, 400, NULL, msg);
    } else {
        return;                                      /* need more bytes */
    }
    respond(c, &r, 1);
}

static void on_connection(uv_stream_t *server, int status) {
    HttpServer *srv = server->data;
    if (status < 0) { log_warn("dashboard accept: %s", uv_strerror(status)); return; }
    HttpConn *c = xcalloc(1, sizeof *c);
    c->srv = srv;
    c->start_ms = c->last_ms = clock_ms();
    uv_tcp_init(server->loop, &c->tcp);
    c->tcp.data = c;
    c->next = srv->conns;
    if (srv->conns) srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp)) { conn_close(c); return; }
    if (srv->nconns > HTTP_MAX_CONNS) {              /* make room: drop the oldest connection still reading */
        HttpConn *old = NULL;
        for (HttpConn *o = c->next; o; o = o->next)
            if (o->phase == CONN_READING && !uv_is_closing((uv_handle_t *)&o->tcp) && (!old || o->start_ms <= old->start_ms))
                old = o;
        if (!old) { conn_close(c); return; }
        log_debug("dashboard: %d connections open; closing the oldest idle one", srv->nconns);
        conn_close(old);
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read)) conn_close(c);
}

static void on_sweep(uv_timer_t *t) {
    HttpServer *s = t->data;
    int64_t now = clock_ms();
    for (HttpConn *c = s->conns; c; c = c->next) {
        int64_t since = c->phase == CONN_READING ? c->start_ms : c->last_ms;   /* no trickling a request forever */
        if (now - since > HTTP_IDLE_MS) conn_close(c);
    }
}

/* ------------------------------------------------------------------------------------------ server */

HttpServer *http_listen(uv_loop_t *loop, const char *hostport, HttpHandler h, void *ud, char err[ERR_LEN]) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host) {
        err_set(err, ERR_INVAL, "cluster.http: '%s' is not host:port", hostport);
        return NULL;
    }
    const char *hb = hostport, *he = colon;
    if (*hb == '[' && he[-1] == ']') { hb++; he--; }            /* [::1]:8080 */
    snprintf(host, sizeof host, "%.*s", (int)(he - hb), hb);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535) {
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
    uv_timer_init(loop, &s->sweep);
    s->tcp.data = s->sweep.data = s;
    s->handles_open = 2;
    int rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&addr, 0);
    if (!rc) rc = uv_listen((uv_stream_t *)&s->tcp, 128, on_connection);
    if (!rc) rc = uv_timer_start(&s->sweep, on_sweep, 1000, 1000);
    if (rc) {
        err_set(err, ERR_IO, "dashboard cannot listen on %s (cluster.http): %s", hostport, uv_strerror(rc));
        http_close(s);
        return NULL;
    }
    uv_unref((uv_handle_t *)&s->sweep);
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    rc = uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&bound, &blen);
    if (rc) {
        err_set(err, ERR_IO, "dashboard on %s: getsockname: %s", hostport, uv_strerror(rc));
        http_close(s);
        return NULL;
    }
    s->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    return s;
}

int http_port(const HttpServer *s) { return s ? s->port : -1; }

void http_close(HttpServer *s) {
    if (!s || s->closing) return;
    s->closing = 1;
    for (HttpConn *c = s->conns; c; c = c->next) conn_close(c);
    uv_close((uv_handle_t *)&s->tcp, on_srv_handle_closed);
    uv_close((uv_handle_t *)&s->sweep, on_srv_handle_closed);
}
