#!/usr/bin/env bash
# Builds runsel's tests in three extra build directories and runs them:
#   build-ubsan    -Db_sanitize=undefined, every suite (UBSan does not replace
#                  malloc, so runsel stays the allocator of every test)
#   build-tsan     -Db_sanitize=thread: the threaded stress test with runsel's
#                  instrumented core linked in under renamed entry points (TSan
#                  owns the process's malloc; see tests/hardening/meson.build).
#                  The unit suites are single-threaded, so TSan finds nothing
#                  there (and takes 7 minutes): RUNSEL_TSAN_UNIT=1 adds them.
#   build-checked  -Dchecked=true: every suite with the allocator's expensive
#                  walkers running inside it
# Usage: tests/hardening/sanitizers.sh [ubsan] [tsan] [checked]   (default: all)
# RUNSEL_SANITIZER_DIR puts the build directories elsewhere (default: the
# source tree, next to build/). Exits non-zero if any suite fails.
set -euo pipefail

source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build_root=${RUNSEL_SANITIZER_DIR:-$source_dir}
containers=(rb_first rb_root lifo array_heap pairing_heap)
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(ubsan tsan checked)
jobs=$(nproc)
summary=()
failed=0

# setup DIR MESON-OPTIONS...: configures DIR once, reconfigures afterwards.
setup() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$source_dir" -Dbenchmarks=false "$@" >/dev/null
  fi
}

# step NAME COMMAND...: runs and times one step, remembering the outcome.
step() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name: $*"
  if "$@"; then
    summary+=("$(printf '%-28s %5d s  ok' "$name" $((SECONDS - start)))")
  else
    summary+=("$(printf '%-28s %5d s  FAILED' "$name" $((SECONDS - start)))")
    failed=1
  fi
}

for kind in "${kinds[@]}"; do
  dir=$build_root/build-$kind
  case $kind in
    ubsan)
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
      step "ubsan: configure" setup "$dir" -Db_sanitize=undefined \
        -Dcpp_args=-fno-sanitize-recover=undefined
      step "ubsan: build" ninja -C "$dir" -j "$jobs"
      step "ubsan: all suites" meson test -C "$dir" --no-rebuild --num-processes "$jobs" \
        --print-errorlogs
      ;;
    tsan)
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
      step "tsan: configure" setup "$dir" -Db_sanitize=thread
      targets=()
      suites=(--suite tsan)
      for c in "${containers[@]}"; do
        targets+=("tests/hardening/tsan_stress_$c")
        if [ "${RUNSEL_TSAN_UNIT:-0}" = 1 ]; then
          targets+=("tests/rb_tree_$c" "tests/containers_$c" "tests/size_classes_$c")
        fi
      done
      [ "${RUNSEL_TSAN_UNIT:-0}" = 1 ] && suites+=(--suite unit)
      step "tsan: build" ninja -C "$dir" -j "$jobs" "${targets[@]}"
      step "tsan: suites ${suites[*]}" meson test -C "$dir" --no-rebuild --num-processes "$jobs" \
        --print-errorlogs "${suites[@]}"
      ;;
    checked)
      step "checked: configure" setup "$dir" -Dchecked=true
      step "checked: build" ninja -C "$dir" -j "$jobs"
      step "checked: all suites" meson test -C "$dir" --no-rebuild --num-processes "$jobs" \
        --print-errorlogs
      ;;
    *)
      echo "unknown kind '$kind' (ubsan, tsan or checked)" >&2
      exit 2
      ;;
  esac
done

echo "== summary ($jobs cores)"
printf '%s\n' "${summary[@]}"
exit $failed
