/* common/net/portcheck.h: whether this host can bind a listening address now, so a launcher can refuse a busy port
 * before any long preparation (issue 33) instead of a daemon failing minutes later.
 * Not here: binding for real (net.h, the coordinator's http.c). */
#ifndef DAPO_PORTCHECK_H
#define DAPO_PORTCHECK_H

#include "core/err.h"

/* A trial bind of a TCP socket with SO_REUSEADDR, as ZeroMQ and libuv bind theirs (a port in TIME_WAIT counts as
 * free, one another socket listens on does not), closed at once. addr: a ZeroMQ endpoint "tcp://HOST:PORT" or the
 * dashboard's "HOST:PORT" / "[IPV6]:PORT"; HOST "*" means every IPv4 address, a name is resolved (its first address).
 * Not checked, 0: port 0 or "*" (the system picks one), ipc:// and inproc:// (no TCP port), a HOST that does not
 * resolve (ZeroMQ also takes an interface name: the daemon reports a bad one). Returns 0 when free; ERR_IO with err
 * "ADDR: in use (EADDRINUSE)" or the bind's other reason (EADDRNOTAVAIL: not an address of this host; EACCES: a
 * privileged port); ERR_INVAL when addr has no HOST:PORT form. */
int net_port_free(const char *addr, char err[ERR_LEN]);

#endif
