/* services/coordinator/evlog.h: the coordinator's event log (cluster.event_log, off by default; issue 35). run.c
 * records every event it hands engine_on and every action of the outbox it carries out, in order, so that a fresh
 * engine fed the same events gives the same actions (tests/integration/test_coord_replay.c) — a run's control
 * decisions, replayable without a cluster.
 *
 * File: "DAPOEVLOG1\n", then records: u8 tag, u32 LE payload length, payload. Integers little-endian.
 *   'H' header   run_id, NUL, the resolved config as YAML (config_print_yaml)
 *   'E' event    u8 kind (EventKind), i32 worker, u32 type, u64 item, u32 attempt, i32 code, u16 version,
 *                u8 n + the sender's routing id, u8 n + its CURVE key name, u8 n + its address, then (EV_MESSAGE,
 *                EV_BAD_HELLO) the message as net_encode frames it
 *   'A' action   u8 kind (OutKind), i32 worker, u32 type, u8 n + the routing id (worker -1), then the frame sent
 *                (a file action: its kind only, and the frame sent after it: what it writes holds times and
 *                timings, which a replay computes anew)
 * A record the reader cannot parse (a log cut short by a crash) ends the reading with ERR_DECODE naming its offset. */
#ifndef DAPO_COORD_EVLOG_H
#define DAPO_COORD_EVLOG_H

#include <stdio.h>

#include "coord.h"

typedef struct EvLog EvLog;

/* Creates (truncates) path and writes the header. NULL with err set (ERR_IO) when it cannot be written. */
EvLog *evlog_open(const char *path, const char *run_id, const Config *cfg, char err[ERR_LEN]);
/* Appends one record; a write error is logged once and the log stops (the run goes on). NULL-safe. */
void evlog_event(EvLog *l, const Event *ev);
void evlog_action(EvLog *l, const OutAction *a);
void evlog_close(EvLog *l);     /* flushes and closes; NULL-safe */

/* One record as read back. Pointers into the reader's buffer, valid until the next evlog_next. */
typedef struct {
    char           tag;            /* 'H', 'E' or 'A' */
    int            kind;           /* EventKind ('E') or OutKind ('A') */
    int            worker;
    Dapo__MsgType  type;
    uint64_t       item;
    uint32_t       attempt;
    int            code;
    uint16_t       version;
    const uint8_t *peer;           /* 'E': the sender's routing id; 'A': the routing id of a reply to a peer */
    size_t         peer_len;
    char           key[160], address[64];
    const uint8_t *frame;          /* 'E': the message; 'A': the frame sent ('H': the config YAML, NUL-terminated) */
    size_t         frame_len;
    const char    *run_id;         /* 'H' */
} EvRecord;

typedef struct EvLogReader EvLogReader;
EvLogReader *evlog_reader_open(const char *path, char err[ERR_LEN]);   /* NULL + ERR_IO / ERR_DECODE (not a log) */
/* 1 with *r filled, 0 at the end, ERR_DECODE with err naming the offset of a record that does not parse. */
int  evlog_next(EvLogReader *rd, EvRecord *r, char err[ERR_LEN]);
void evlog_reader_close(EvLogReader *rd);

#endif
