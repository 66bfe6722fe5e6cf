/* common/core/config_verl.h: verl's keys that config.c's table has no row for — what dapo does with each (issue 37).
 *
 * A verl recipe moves over unchanged: every key of verl 0.9.1's resolved PPO config (verl/trainer/config/
 * _generated_ppo_trainer.yaml; tests/data/verl/ppo_trainer.keys) is a table row or an alias of one (config.c), or has a
 * rule here. A rule either ignores the key with a reason — only a knob of verl's own machinery (its training engine,
 * its rollout server, its cluster, its observability) or one read only by a part verl runs under a setting dapo
 * refuses — or ties an algorithm key to the values dapo trains with, refusing the others with what dapo has.
 * tests/unit/test_config_verl.c classifies the whole file. Not here: the table's keys, aliases and defaults (config.c). */
#ifndef DAPO_CONFIG_VERL_H
#define DAPO_CONFIG_VERL_H

#include <stdbool.h>

typedef enum {
    VERL_ENGINE = 1,   /* tunes verl's training engine (FSDP/Megatron, torch, offload, micro-batching): ignored */
    VERL_SERVING,      /* tunes verl's rollout server (vLLM/SGLang) or its weight sync: ignored */
    VERL_CLUSTER,      /* Ray, GPUs, nodes, NCCL: ignored (dapo's are cluster.*) */
    VERL_OBSERVE,      /* profilers, traces, loggers' extras, dumps: ignored */
    VERL_IDLE,         /* read only by a part verl runs when `guard` has a value dapo refuses: ignored */
    VERL_FIXED,        /* an algorithm key dapo implements at the values `ok` only: any other value is refused */
    VERL_REFUSED,      /* an algorithm knob dapo does not have: refused at any value */
} VerlKind;

typedef struct {
    const char *key;   /* dotted key, or a subtree when it ends in '.' */
    VerlKind    kind;
    const char *ok;    /* VERL_FIXED: the accepted values, "a|b", lower case; "null" stands for YAML null / empty */
    const char *guard; /* VERL_IDLE: the key that switches the part on (a VERL_FIXED rule or a table row) */
    const char *why;   /* the reason, printed with the warning or the refusal */
} VerlKey;

/* The rule for key: the exact one, else the longest subtree holding it; a key ending in "._target_" (Hydra's
 * dataclass of a section) and any key under a `profiler.` section have their own. NULL: verl has no such key that
 * dapo knows of. Static storage. */
const VerlKey *config_verl_key(const char *key);

/* True when value (as given: "True", "null", "", "1.0") is one of k->ok (VERL_FIXED): text compared case-blind, numbers
 * by value, "", "~", "null" and "none" all null. */
bool config_verl_value_ok(const VerlKey *k, const char *value);

/* True when key is a section holding rules (a prefix of a rule's key followed by '.'). */
bool config_verl_is_section(const char *key);

/* The words for a kind in messages ("tunes verl's training engine"). */
const char *config_verl_kind_text(VerlKind kind);

#endif
