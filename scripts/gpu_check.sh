#!/usr/bin/env bash
# Verify a GPU machine end to end, in one command (README, "On a GPU"):
#   1. install the gpu extra (CuPy, the CUDA 12 runtime wheels, NVRTC); --no-install skips it, for a machine
#      without network whose Python already has CuPy
#   2. report the device and the engine's CUDA probe (engine.cuda.is_available() and its reason)
#   3. the GPU tests (pytest -m gpu) and the kernel tests, with every kernel launched on the device
#   4. benchmarks/bench_cuda.py (engine vs torch on the same GPU, and vs the engine on the CPU)
#   5. the CNN example trained on the CPU and on CUDA: time and validation accuracy of each
# Every step runs even when an earlier one fails; the summary at the end lists each, and the exit status is
# non-zero when any failed.     usage: scripts/gpu_check.sh [--no-install] [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
INSTALL=1
QUICK=0
for arg in "$@"; do
  case "$arg" in
    --no-install) INSTALL=0 ;;
    --quick) QUICK=1 ;;
    *) echo "usage: $0 [--no-install] [--quick]" >&2; exit 2 ;;
  esac
done
declare -a SUMMARY=()
FAILED=0
step() {  # step NAME COMMAND...: run, time and record one step
  local name=$1; shift
  echo; echo "=== $name"
  local t0=$SECONDS
  "$@"
  local rc=$?
  local verdict="ok"
  if [ $rc -ne 0 ]; then verdict="FAILED (exit $rc)"; FAILED=1; fi
  SUMMARY+=("$(printf '%-34s %-18s %4ss' "$name" "$verdict" $((SECONDS - t0)))")
}

if [ $INSTALL -eq 1 ]; then
  step "install .[gpu,test]" $PY -m pip install -q -e ".[gpu,test]"
fi

probe() {
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $PY - <<'PY'
import sys
import engine
from engine.backend import cupy_backend
print("python", sys.version.split()[0])
ok = engine.cuda.is_available()
print("engine.cuda.is_available():", ok, "" if ok else f"({cupy_backend.unavailable_reason()})")
if ok:
    import cupy
    print("device:", engine.cuda.get_device_name(), "capability", engine.cuda.get_device_capability())
    print("cupy", cupy.__version__, "CUDA runtime", cupy.cuda.runtime.runtimeGetVersion(),
          "driver", cupy.cuda.runtime.driverGetVersion())
sys.exit(0 if ok else 1)
PY
}
step "probe" probe

export PYTHONUNBUFFERED=1
step "pytest -m gpu" $PY -m pytest -q -p no:cacheprovider -m gpu tests/engine/backend/test_gpu_parity.py -o addopts="" --timeout 300
step "kernel tests on the device" env WIREGRAD_KERNEL_RUNNER=cuda $PY -m pytest -q -p no:cacheprovider \
  tests/engine/backend/test_kernels.py -o addopts="" --timeout 300 -k "not compiles_with_nvrtc"
if [ $QUICK -eq 1 ]; then
  step "bench_cuda" $PY benchmarks/bench_cuda.py --rounds 3 --iters 10
else
  step "bench_cuda" $PY benchmarks/bench_cuda.py --rounds 5 --profile
fi

train_both() {
  # CUDA trains twice: the first run also compiles CuPy's and our kernels (NVRTC; cached on disk for later
  # runs), the second is what a user sees from then on
  local out; out=$(mktemp -d)
  local epochs=15; [ $QUICK -eq 1 ] && epochs=3
  for run in cpu cuda cuda-again; do
    $PY -m app.cli train assets/examples/cnn_digits.json --device "${run%-again}" --epochs $epochs --quiet \
      --out "$out/$run" || return 1
  done
  $PY - "$out" <<'PY'
import json, sys
runs = {d: json.load(open(f"{sys.argv[1]}/{d}/summary.json")) for d in ("cpu", "cuda", "cuda-again")}
for name, s in runs.items():
    print(f"CNN example on {name:10}: {s['seconds']:7.2f} s, val accuracy {s['val_accuracy']:.4f}, "
          f"val loss {s['val_loss']:.4f}, status {s['status']}")
cpu, cold, warm = runs.values()
print(f"cuda / cpu time: {cold['seconds'] / cpu['seconds']:.2f}x first run (kernels compiled), "
      f"{warm['seconds'] / cpu['seconds']:.2f}x once compiled")
ok = all(s["status"] == "finished" and abs(s["val_accuracy"] - cpu["val_accuracy"]) < 0.05 for s in (cold, warm))
sys.exit(0 if ok else 1)
PY
}
step "CNN example, cpu and cuda" train_both

echo; echo "=== summary"
printf '%s\n' "${SUMMARY[@]}"
exit $FAILED
