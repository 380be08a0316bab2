#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source is not formatted by .clang-format (Google base, 100
# columns). Fix with: clang-format -i $(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
# One clang-format per file (a failing file is named), the files split over the cores.
mapfile -t unformatted < <(printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$(nproc)" sh -c '
  for file in "$@"; do clang-format --dry-run -Werror "$file" > /dev/null 2>&1 || echo "$file"; done
' check_format | sort)
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check_format: not clang-formatted (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1)):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
