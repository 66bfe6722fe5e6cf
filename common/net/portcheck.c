/* common/net/portcheck.c: net_port_free (portcheck.h): getaddrinfo, socket, SO_REUSEADDR, bind, close.
 * Not here: any retry or wait (a busy port is reported, not waited for). */
#include "net/portcheck.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int net_port_free(const char *addr, char err[ERR_LEN]) {
    if (!addr) return err_set(err, ERR_INVAL, "no address");
    const char *hp = addr;
    if (!strncmp(addr, "tcp://", 6)) hp = addr + 6;
    else if (strstr(addr, "://")) return 0;          /* ipc://, inproc://: no TCP port */
    const char *colon = strrchr(hp, ':');
    if (!colon || colon == hp || !colon[1]) return err_set(err, ERR_INVAL, "'%s' is not HOST:PORT", addr);
    const char *hb = hp, *he = colon;
    if (*hb == '[' && he - hb >= 2 && he[-1] == ']') { hb++; he--; }
    char host[256], port[16];
    snprintf(host, sizeof host, "%.*s", (int)(he - hb), hb);
    snprintf(port, sizeof port, "%s", colon + 1);
    if (!strcmp(port, "*") || !strcmp(port, "0")) return 0;
    if (!strcmp(host, "*")) snprintf(host, sizeof host, "0.0.0.0");
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    if (getaddrinfo(host, port, &hints, &ai) || !ai) return 0;   /* an interface name, say: the daemon says */
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;
    if (fd < 0) {
        rc = err_set(err, ERR_IO, "%s: socket: %s", addr, strerror(errno));
    } else {
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) || bind(fd, ai->ai_addr, ai->ai_addrlen))
            rc = err_set(err, ERR_IO, "%s: %s", addr, errno == EADDRINUSE ? "in use (EADDRINUSE)" : strerror(errno));
        close(fd);
    }
    freeaddrinfo(ai);
    return rc;
}
