#!/usr/bin/env bash
# Bazel's workspace status (.bazelrc): the git commit the build came from,
# for `ddp_train --version`. "unknown" outside a git checkout.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-modified"
fi
echo "STABLE_GIT_COMMIT $commit"
