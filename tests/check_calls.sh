#!/usr/bin/env bash
# tests/check_calls.sh: no circle of files in a module (issue 35). Builds the file-level call graph of one folder's
# object files with nm — A -> B when A.o has an undefined symbol that B.o defines — and fails on any cycle, printing
# the files of each cycle and the symbols behind their arrows.
#
#   tests/check_calls.sh [OBJ_DIR]       (default $BUILD/obj/services/coordinator, BUILD=build)
#
# Exit 0: no cycle; 1: a cycle (listed); 2: no object files in OBJ_DIR (build first). Needs nm (binutils) and awk. Run by tests/run.sh (make test); tests/check_calls_test.sh plants a back-call to check the check.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
dir=${1:-$BUILD/obj/services/coordinator}
shopt -s nullglob
objs=("$dir"/*.o)
[ ${#objs[@]} -gt 0 ] || { echo "calls: no object files in $dir: build first (make test-build)" >&2; exit 2; }
declare -A owner
for o in "${objs[@]}"; do
  f=$(basename "$o" .o)
  while read -r _ _ sym; do owner[$sym]=$f; done < <(nm --defined-only -g "$o")
done
edges=$(mktemp); trap 'rm -f "$edges" "$edges.loops"' EXIT
for o in "${objs[@]}"; do
  f=$(basename "$o" .o)
  while read -r _ sym; do
    t=${owner[$sym]:-}
    [ -n "$t" ] && [ "$t" != "$f" ] && echo "$f $t $sym"
  done < <(nm -u "$o")
done | sort -u > "$edges"
# the strongly connected components (transitive closure, Floyd-Warshall: a module has tens of files); each component
# of two or more files is a cycle
{ for o in "${objs[@]}"; do echo "node $(basename "$o" .o)"; done; cut -d' ' -f1,2 "$edges" | sed 's/^/edge /'; } |
  awk 'BEGIN { n = 0 }
       $1 == "node" { id[$2] = n; name[n++] = $2; next }
       { r[id[$2], id[$3]] = 1 }
       END {
         for (k = 0; k < n; k++) for (i = 0; i < n; i++) if (r[i, k]) for (j = 0; j < n; j++) if (r[k, j]) r[i, j] = 1
         for (i = 0; i < n; i++) {
           if (done[i] || !r[i, i]) continue
           line = ""
           for (j = 0; j < n; j++) if (r[i, j] && r[j, i]) { done[j] = 1; line = line " " name[j] }
           print substr(line, 2)
         }
       }' > "$edges.loops"
if [ -s "$edges.loops" ]; then
  echo "calls: $dir has a circle of files (A -> B: A calls a function B defines):"
  while read -r -a scc; do
    echo "  cycle of ${#scc[@]} files: ${scc[*]}"
    in_scc=" ${scc[*]} "
    while read -r a b sym; do
      [[ "$in_scc" == *" $a "* && "$in_scc" == *" $b "* ]] && echo "    $a -> $b  $sym"
    done < "$edges"
  done < "$edges.loops"
  exit 1
fi
echo "calls: no circle of files in $dir ($(wc -l < "$edges") arrows among ${#objs[@]} files)"
exit 0
