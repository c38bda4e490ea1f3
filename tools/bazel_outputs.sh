# Sourced by scripts that pick up Bazel's outputs (tools/release.sh,
# tests/gpu/run_gpu_checks.sh), from the repository root.
#
# bazel_outputs [--flag ...] target ...: the files a build of the targets
# makes (with those flags), one path per line, from Bazel itself. Bazel 4.2
# has no cquery --output=files; a Starlark expression prints the same.
bazel_outputs() {
  local flags=() targets=()
  for arg in "$@"; do [[ $arg == --* ]] && flags+=("$arg") || targets+=("$arg"); done
  local expression
  expression="$(IFS=+; echo "${targets[*]}")"
  ./bazelw cquery "${flags[@]}" --output=starlark \
    --starlark:expr='"\n".join([f.path for f in target.files.to_list()])' "${expression}" 2>/dev/null |
    grep -v '^$'
  [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "bazel cquery ${targets[*]} failed" >&2; return 1; }
}
