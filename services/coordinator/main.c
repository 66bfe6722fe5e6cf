/* services/coordinator/main.c: dapo-coordinator entry point. Work in progress: loads the config and exits. */
#include "core/config.h"
#include "core/log.h"

#include <stdio.h>

int main(int argc, char **argv) {
    log_init("coordinator", LL_INFO);
    Config cfg;
    bool print = false;
    char err[ERR_LEN];
    if (config_from_cli(&cfg, &argc, argv, &print, err)) {
        log_error("%s", err);
        config_free(&cfg);
        return 2;
    }
    if (print) config_print_yaml(&cfg, stdout);
    config_free(&cfg);
    return 0;
}
