#!/usr/bin/env bash
# The wheels ctc-doctor needs on the lent GPU machine (its image has torch, transformers, rich, click and
# networkx, not pydantic): downloaded here into .whl/ (git-ignored locally) for that image's Python 3.12.
# Then name `.whl` in the device tool's `carry` and run `bash benchmarks/gpu_check.sh` there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
# the versions the dev venv tests with (pydantic-core pinned by pydantic)
for spec in pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" -d .whl "$spec"
done
ls -1 .whl
