#!/usr/bin/env bash
# tests/check_layers.sh: the include rules of the tree (README "Layout"), checked on every #include "..." line:
#   - a common/ folder includes only itself and the folders below it (the table below): backend/ (kernels) includes
#     nothing above core/, io/ and model/ do not include each other both ways (model/ may read io/, not back);
#   - a service includes common/ and its own headers only, never another service's;
#   - the product (common/, services/, tools/) never includes tests/.
# Prints each violation as file:line and exits 1 when there is one. Run by tests/run.sh (make test).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
declare -A allow=(
  [core]="core"
  [backend]="backend core"
  [tokenizer]="tokenizer core"
  [reward]="reward core"
  [collective]="collective core"
  [dapo]="dapo core"
  [net]="net core"
  [io]="io core tokenizer"
  [model]="model core backend io collective"
)
bad=0
report() { echo "layering: $1"; bad=1; }
while IFS=: read -r file line text; do
  inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$text")
  top=${inc%%/*}
  case "$file" in
    common/*)
      folder=$(cut -d/ -f2 <<<"$file")
      [ "$inc" = "$top" ] && continue                      # same-folder header without a path (generated protobuf)
      [ "$inc" = "dapo.pb-c.h" ] && continue
      [ -z "${allow[$folder]+x}" ] && { report "$file:$line: folder common/$folder has no rule in tests/check_layers.sh"; continue; }
      [ "$top" = tests ] && { report "$file:$line: product code includes a test header ($inc)"; continue; }
      [[ " ${allow[$folder]} " == *" $top "* ]] ||
        report "$file:$line: common/$folder may include only {${allow[$folder]}}, not $inc"
      ;;
    services/*)
      svc=$(cut -d/ -f2 <<<"$file")
      if [[ "$inc" != */* ]]; then
        [ -f "services/$svc/$inc" ] || [ "$inc" = "dapo.pb-c.h" ] || [[ "$inc" == static_* ]] ||
          report "$file:$line: $inc is not a header of services/$svc"
      elif [ "$top" = services ] || [ "$top" = tests ] || [ -z "${allow[$top]+x}" ]; then
        report "$file:$line: a service includes common/ and its own headers only, not $inc"
      fi
      ;;
    tools/*)
      [ "$top" = tests ] || [ "$top" = services ] && report "$file:$line: a tool includes common/ only, not $inc"
      ;;
  esac
done < <(grep -rn --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' common services tools)
[ "$bad" -eq 0 ] && echo "layering: every include in common/, services/ and tools/ follows the rules"
exit "$bad"
