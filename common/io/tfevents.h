/* common/io/tfevents.h: a TensorBoard event file writer for scalars (verl's trainer.logger=tensorboard).
 *
 * File: <dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>, a sequence of TFRecord records, each
 *   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)
 * where masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 with c the CRC-32C (Castagnoli) of x
 * (tensorflow/core/lib/io/record_writer.cc). data is one tensorboard.Event (proto/tensorboard.proto); the first
 * record carries file_version "brain.Event:2", then one Event per step with a Summary of simple_value scalars.
 * Each step's record is flushed at once, so TensorBoard shows a live run and a crash loses at most that record.
 * A resumed run opens a new file in the same directory; TensorBoard reads every file of a directory as one run.
 * Not here: which metrics (the coordinator passes each step's Metrics), where the directory is (the caller: verl's
 * TENSORBOARD_DIR, else tensorboard_log/<project_name>/<experiment_name>). */
#ifndef DAPO_TFEVENTS_H
#define DAPO_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/metrics.h"

typedef struct TfEvents TfEvents;

/* Creates dir (and its parents) when missing, opens a new event file in it and writes the file_version record.
 * NULL with err set (naming the path) when it cannot. */
TfEvents *tfevents_open(const char *dir, char err[ERR_LEN]);

/* Appends one Event at step with one scalar per metric (tag = metric name; non-finite values are left out, as
 * TensorBoard cannot plot them) and wall_time in Unix seconds, then flushes. 0 or ERR_IO. */
int tfevents_write_scalars(TfEvents *w, long step, double wall_time, const Metrics *m);

/* The path of the file being written (owned by w). */
const char *tfevents_path(const TfEvents *w);

/* Closes the file; NULL-safe. */
void tfevents_close(TfEvents *w);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of buf[0..n), and TFRecord's masked form of it. */
uint32_t crc32c(const void *buf, size_t n);
uint32_t crc32c_masked(const void *buf, size_t n);

#endif
