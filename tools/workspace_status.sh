#!/usr/bin/env bash
# Bazel's workspace status (.bazelrc --workspace_status_command): the commit
# a build comes from, for --version. Stable keys: a change re-runs only the
# stamped genrule (//worker:build_version) and what links it.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then commit="$commit+local-changes"; fi
echo "STABLE_GIT_COMMIT $commit"
