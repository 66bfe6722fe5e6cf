#!/usr/bin/env bash
# tests/check_layers.sh: the include rules of the tree (README "Layout"), checked on every #include "..." line:
#   - a common/ folder includes only itself and the folders below it (the table below): backend/ (kernels) includes
#     nothing above core/, io/ and model/ do not include each other both ways (model/ may read io/, not back);
#   - a service includes common/ and its own headers only, never another service's;
#   - the product (common/, services/, tools/) never includes tests/;
#   - the model handle is opaque: a *_internal.h header is included only from its own folder (the scan covers
#     common/, services/ and tools/; white-box unit tests under tests/unit may include one).
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
  [settings]="settings core dapo model io tokenizer backend"
)
bad=0
report() { echo "layering: $1"; bad=1; }
folders=" ${!allow[*]} "
# every include line: quotes or angle brackets, any spacing; the header path normalised (a/b/../c -> a/c) so that
# ".." cannot hide an upward include; angle-bracket includes count when they name a project folder
while IFS=: read -r file line text; do
  inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/' <<<"$text")
  angle=0; [[ "$text" =~ include[[:space:]]*\< ]] && angle=1
  if [[ "$inc" == */* ]]; then
    dir=$(dirname "$file")
    # relative to the including file's folder when it exists there, else to the include roots (. and common/)
    if [[ "$inc" == ../* || "$inc" == ./* ]]; then norm=$(realpath -m --relative-to=. "$dir/$inc")
    else norm=$(realpath -m "/$inc"); norm=${norm#/}; fi
    norm=${norm#common/}
  else
    norm=$inc
  fi
  top=${norm%%/*}
  if [ "$angle" = 1 ] && [[ "$folders" != *" $top "* ]] && [ "$top" != services ] && [ "$top" != tests ]; then
    continue                                             # a system or library header
  fi
  if [[ "$norm" == *_internal.h ]] && [ "$(dirname "$norm")" != "$(dirname "${file#common/}")" ]; then
    report "$file:$line: $inc is internal to common/$(dirname "$norm")"; continue
  fi
  case "$file" in
    common/*)
      folder=$(cut -d/ -f2 <<<"$file")
      [ "$norm" = "$top" ] && [ "$angle" = 0 ] && continue   # same-folder header without a path (generated protobuf)
      [ "$norm" = "dapo.pb-c.h" ] && continue
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
      elif [[ "$norm" == services/$svc/* ]]; then
        :                                                    # its own header, named by path
      elif [ "$top" = services ] || [ "$top" = tests ] || [ -z "${allow[$top]+x}" ]; then
        report "$file:$line: a service includes common/ and its own headers only, not $inc"
      fi
      ;;
    tools/*)
      { [ "$top" = tests ] || [ "$top" = services ]; } && report "$file:$line: a tool includes common/ only, not $inc"
      ;;
  esac
done < <(grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' common services tools)
# an include of a macro (#include NAME) cannot be checked: refuse it
while IFS=: read -r file line text; do
  report "$file:$line: #include of a macro is not allowed (the layering check cannot see through it)"
done < <(grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' '^[[:space:]]*#[[:space:]]*include[[:space:]]+[A-Za-z_]' common services tools)
[ "$bad" -eq 0 ] && echo "layering: every include in common/, services/ and tools/ follows the rules"
exit "$bad"
