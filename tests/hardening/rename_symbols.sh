#!/bin/sh
# rename_symbols.sh IN.a OUT.a OBJCOPY-OPTIONS...: copies a static library,
# thin or not, into a normal archive with its objects passed through objcopy
# (used to rename runsel's malloc & co. for the ThreadSanitizer build).
set -eu
in=$1
out=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0
for member in $(ar t "$in"); do
  [ -f "$member" ] || member=$(dirname "$in")/$member
  n=$((n + 1))
  objcopy "$@" "$member" "$work/$n.o"
done
rm -f "$out"
ar rcs "$out" "$work"/*.o
