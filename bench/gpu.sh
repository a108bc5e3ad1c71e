#!/usr/bin/env bash
# Benchmark 9: the torch backend on a CUDA GPU (see bench/gpu.py for what is measured and why the
# work is split). Three steps, from the repository root:
#
#   1. here, once (minutes: xz of the 92 MB ONNX):   bench/gpu.sh prepare
#        writes .assets/gpu-bench/ (phonemized texts, voice pack, config, xz'd ONNX: about 58 MiB)
#        and the kokoro and loguru wheels in .whl/; both folders are git-ignored.
#   2. on the GPU machine (the device tool's run; the machine has PyTorch and onnx, not this venv):
#        command: bash bench/gpu.sh     carry: [".assets/gpu-bench", ".whl"]     timeout_s: 480
#        it writes $OUT/gpu.json and $OUT/gpu.log (about 2-3 minutes on one GPU).
#   3. here:   bench/gpu.sh save <the folder the files came back to>/gpu.json
#        stores bench/results/gpu.json and gpu.png and rewrites bench/RESULTS.md.
#
# Keep the working tree small: what travels (tracked + untracked files + carried paths) must stay under
# 64 MiB, and the ONNX alone takes about 58 MiB of it.
set -euo pipefail
cd "$(dirname "$0")/.."
HERE_PY=${PY:-.venv/bin/python}

case "${1:-measure}" in
  prepare)
    HF_HUB_OFFLINE=1 "$HERE_PY" -m bench.gpu prepare
    versions=$("$HERE_PY" -c 'import importlib.metadata as m; print(*(f"{n}=={m.version(n)}" for n in ("kokoro", "loguru")))')
    # Pure-Python wheels; --no-deps: the GPU machine has torch, transformers, numpy and huggingface_hub.
    # shellcheck disable=SC2086
    "$HERE_PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl $versions
    du -sh .assets/gpu-bench .whl
    ;;
  measure)
    : "${OUT:?OUT is set by the device tool: the folder whose files come back}"
    for wheel in .whl/kokoro-*.whl .whl/loguru-*.whl; do
      test -f "$wheel" || { echo "missing $wheel: run 'bench/gpu.sh prepare' first and carry .whl" >&2; exit 2; }
    done
    test -f .assets/gpu-bench/kokoro-v1.0.int8.onnx.xz || {
      echo "missing .assets/gpu-bench: run 'bench/gpu.sh prepare' first and carry it" >&2; exit 2; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/kokoro-*.whl .whl/loguru-*.whl
    export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$OUT/nvidia-smi.csv" 2>&1 || true
    python3 -m bench.gpu measure --out "$OUT/gpu.json" 2>&1 | tee "$OUT/gpu.log"
    ;;
  save)
    "$HERE_PY" -m bench.gpu save "${2:?usage: bench/gpu.sh save PATH/gpu.json}"
    ;;
  *)
    echo "usage: bench/gpu.sh [prepare | measure | save PATH/gpu.json]" >&2
    exit 2
    ;;
esac
