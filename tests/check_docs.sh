#!/usr/bin/env bash
# tests/check_docs.sh [ROOT]: every Markdown file that code, configs, scripts, deploy files or benchmarks name (a
# token ending in ".md" outside *.md files) exists in the repository and is not empty — a user's clone must carry
# what the code cites (docs/design.md, docs/conventions.md, ...). A name with a "/" is a path from the repository
# root; a bare name is looked up beside the file that names it, then at the root. tests/check_docs_test.sh (whose
# planted names are its data) is not scanned. Prints each missing or empty one
# as file:line: name and exits 1 when there is one. Run by tests/run.sh (make test); ROOT (default: this checkout)
# lets tests/check_docs_test.sh run it on a planted tree. Files are those git tracks (every file, less build outputs,
# in a tree without git).
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
bad=0 n=0
while IFS= read -r hit; do
  file=${hit%%:*} rest=${hit#*:} line=${rest%%:*} name=${rest#*:}
  n=$((n+1))
  if [[ $name == */* ]]; then cand=("$name"); else cand=("$(dirname "$file")/$name" "$name"); fi
  ok=0
  for c in "${cand[@]}"; do [ -s "$c" ] && { ok=1; break; }; done
  [ $ok = 1 ] || { echo "$file:$line: $name is named but missing or empty"; bad=1; }
done < <(pat='[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b'
         dirs=(common services tools configs deploy bench tests proto Makefile .ci)
         if git rev-parse --git-dir > /dev/null 2>&1; then git grep -noE "$pat" -- "${dirs[@]}" ':!*.md' ':!tests/check_docs_test.sh'
         else   # a tree without git (an unpacked bundle): the same files, less build outputs
           for d in "${dirs[@]}"; do [ -e "$d" ] && echo "$d"; done |
             xargs grep -rnoIE --exclude='*.md' --exclude=check_docs_test.sh --exclude-dir=build --exclude-dir=build-san "$pat"
         fi 2>/dev/null)
[ $bad = 0 ] && echo "docs: all $n Markdown names in code and configs exist"
exit $bad
