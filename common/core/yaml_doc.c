/* common/core/yaml_doc.c: a bounded, resolved YAML document (see yaml_doc.h). */
#include "core/yaml_doc.h"

/* Counts the nodes n stands for once resolved (an alias: its target's, again for every alias), spending *left;
 * -1 once it runs out or nests past 256 levels. The work is at most the budget, however deep the aliases nest. */
static int count(struct fy_node *n, long *left, int depth) {
    if (!n) return 0;
    if (--*left < 0 || depth > 256) return -1;
    if (fy_node_is_alias(n)) return count(fy_node_resolve_alias(n), left, depth + 1);
    void *it = NULL;
    if (fy_node_is_sequence(n)) {
        struct fy_node *c;
        while ((c = fy_node_sequence_iterate(n, &it)))
            if (count(c, left, depth + 1)) return -1;
    } else if (fy_node_is_mapping(n)) {
        struct fy_node_pair *p;
        while ((p = fy_node_mapping_iterate(n, &it)))
            if (count(fy_node_pair_key(p), left, depth + 1) || count(fy_node_pair_value(p), left, depth + 1))
                return -1;
    }
    return 0;
}

struct fy_document *yaml_doc_build(const char *path, const char *buf, size_t len, struct fy_diag *diag, int *rc,
                                   char err[ERR_LEN]) {
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET, .diag = diag};   /* unresolved: aliases stay references */
    struct fy_document *doc = buf ? fy_document_build_from_string(&pcfg, buf, len)
                                  : fy_document_build_from_file(&pcfg, path);
    *rc = 0;
    if (!doc) return NULL;
    long left = YAML_MAX_NODES;
    if (count(fy_document_root(doc), &left, 0)) {
        fy_document_destroy(doc);
        *rc = err_set(err, ERR_INVAL, "%s: its anchors and aliases expand to more than %ld YAML nodes (or nest past "
                      "256 levels): refused", path ? path : "YAML", YAML_MAX_NODES);
        return NULL;
    }
    if (fy_document_resolve(doc)) {                   /* an alias or merge key that does not resolve: diag says */
        fy_document_destroy(doc);
        return NULL;
    }
    return doc;
}
