/* common/core/yaml_doc.h: a YAML document built with libfyaml, its anchors, aliases and merge keys resolved, and
 * bounded: a document whose aliases would expand past YAML_MAX_NODES nodes (a "billion laughs" file: 22 nested
 * aliases are 3.4 GB resolved; issue 38) is refused before it is resolved. The config loader's only way in.
 * Not here: what the document means (config.c). */
#ifndef DAPO_YAML_DOC_H
#define DAPO_YAML_DOC_H

#include <stddef.h>

#include <libfyaml.h>

#include "core/err.h"

#define YAML_MAX_NODES 200000L   /* nodes of the resolved document; a full config has about 2,000 */

/* From the file `path` (buf NULL) or from buf[0..len) (path only names it in messages), parsed with
 * FYPCF_QUIET and diag (may be NULL: libfyaml's messages are dropped). Returns the resolved document (the caller
 * fy_document_destroy's it), or NULL with *rc: 0 when libfyaml read or resolved no document (diag holds its errors,
 * if any), ERR_INVAL with err when the aliases expand past YAML_MAX_NODES (or nest past 256 levels). */
struct fy_document *yaml_doc_build(const char *path, const char *buf, size_t len, struct fy_diag *diag, int *rc,
                                   char err[ERR_LEN]);

#endif
