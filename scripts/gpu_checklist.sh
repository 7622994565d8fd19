#!/usr/bin/env bash
# ../shared/gpu-checklist.md, items 1 and 2, in one call on a lent CUDA machine (no network there):
#   the image's Python (CUDA torch) becomes .venv, z3-solver and expecttest come from .whl/ (carried);
#   make test's main pytest run (-n $WORKERS) and `fx-conformance verify` (default device: cuda) on
#   the passes of tests/passes/ run side by side, each under its own deadline.
# Everything lands in $OUT (at most 8 files come back): env.txt, pytest.log, junit.xml, verify.tsv,
# verify.log, probe.txt, devices.tgz (the probed per-device table).
#
#   bash scripts/gpu_checklist.sh [PYTEST_SECONDS] [VERIFY_SECONDS]
set -u
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
PYTEST_S=${1:-420}; VERIFY_S=${2:-300}
WORKERS=${WORKERS:-10}; VERIFY_JOBS=${VERIFY_JOBS:-5}
export FX_CONFORMANCE_CACHE=$PWD/.fx-conformance-cache PYTHONUNBUFFERED=1 PYTHONPATH=$PWD  # tests.passes for verify

if [ "${SETUP:-1}" = 1 ]; then  # SETUP=0: use the .venv that is there (a dry run on a CPU machine)
    PY=$(python3 -c "import sys; print(sys.prefix)")
    ln -sfn "$PY" .venv
    .venv/bin/python -m pip install -q --no-index --no-deps .whl/*.whl >/dev/null 2>&1
    .venv/bin/python -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1
    touch .venv/.fx-conformance-installed
fi
{
    date -u; nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    .venv/bin/python -c "import torch, triton, hypothesis, z3; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'triton', triton.__version__, 'hypothesis', hypothesis.__version__, 'z3', z3.get_version_string()); \
print(torch.cuda.get_device_name(), torch.cuda.get_device_capability())"
    git log --oneline -1 2>/dev/null || true
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# name|expected exit|target and options (seed 0, as tests/test_planted.py, test_patterns.py and
# test_op_families.py check them on the CPU)
P=tests.passes
RUNS=(
    "identity|4|$P.correct:identity"
    "cse_banning_random|0|$P.correct:cse_pass_banning_random"
    "fx_graph_cse|0|torch._functorch.compile_utils:fx_graph_cse"
    "eliminate_dead_code|0|torch.fx:Graph.eliminate_dead_code"
    "view_to_reshape|0|torch._inductor.fx_passes.post_grad:view_to_reshape"
    "stable_topological_sort|0|torch._inductor.fx_passes.post_grad:stable_topological_sort"
    "constant_fold|0|torch._inductor.constant_folding:constant_fold"
    "twin.log_exp|0|$P.patterns:fold_double_negation"
    "twin.cast_round_trip|0|$P.patterns:drop_widening_round_trip"
    "twin.where_compare|0|$P.patterns:canonicalize_where_condition"
    "twin.square|0|$P.patterns:square_to_mul_typed"
    "twin.integral_scalar|0|$P.patterns:integral_scalars_on_floats"
    "twin.fmax|0|$P.patterns:maximum_to_fmax_integral"
    "twin.repair_first|0|$P.patterns:repair_input_outputs --ensure no-input-as-output"
    "twin.mm_add_alpha|0|$P.op_families:fuse_mm_add"
    "twin.softmax_no_max|0|$P.op_families:softmax_decomposed"
    "twin.layer_norm_unbiased|0|$P.op_families:layer_norm_decomposed --no-special-values"
    "bug.log_exp|1|$P.patterns:fold_log_exp --no-shrink"
    "bug.cast_round_trip|1|$P.patterns:drop_cast_round_trip --no-shrink"
    "bug.where_compare|1|$P.patterns:invert_where_condition --no-shrink"
    "bug.square|1|$P.patterns:square_to_mul --no-shrink"
    "bug.integral_scalar|1|$P.patterns:integral_scalars --no-shrink"
    "bug.fmax|1|$P.patterns:maximum_to_fmax --no-shrink"
    "bug.repair_first|1|$P.patterns:repair_first_input_output --ensure no-input-as-output --no-shrink"
    "bug.mm_add_alpha|1|$P.op_families:fuse_mm_add_ignoring_alpha --no-shrink"
    "bug.softmax_no_max|1|$P.op_families:softmax_without_max --no-shrink"
    "bug.layer_norm_unbiased|1|$P.op_families:layer_norm_unbiased --no-special-values --no-shrink"
    "planted.operand_swap|1|$P.planted:canonicalize_broadcast_operands --no-shrink"
    "planted.dropped_kwarg|1|$P.planted:normalize_call_convention --no-shrink"
    "planted.dtype_promotion|1|$P.planted:ExplicitTypePromotion --no-shrink"
    "planted.nan_semantics|1|$P.planted:lower_for_select_only_backend --no-shrink"
    "planted.cse_across_mutation|1|$P.planted:reinplace_then_cse --graphs mutating --no-shrink"
    "planted.dce_side_effect|1|$P.planted:eliminate_dead_code --graphs mutating --no-shrink"
    "planted.aliasing|1|$P.planted:remove_noop_ops --no-shrink"
    "planted.input_overwrite|1|$P.planted:reinplace_last_use --no-shrink"
    "planted.output_shape|1|$P.planted:remove_noop_reshapes --no-shrink"
    "planted.rounding_cast|1|$P.planted:upcast_low_precision --no-shrink"
    "planted.contract_violation|1|$P.planted:reinplace_temporaries --ensure functional --no-shrink"
    "planted.crash|1|$P.planted:annotate_memory_footprint --no-shrink"
    "planted.hang|1|$P.planted:simplify_to_fixpoint --timeout 5 --no-shrink"
    "planted.segfault|1|$P.planted:fingerprint_tensors --no-shrink"
    "planted.exit|1|$P.planted:reject_unsupported_views --no-shrink"
)

one_verify() {  # name|expected|target options -> one line of verify.tsv
    local name=${1%%|*} rest=${1#*|}; local want=${rest%%|*} args=${rest#*|}
    local t0=$SECONDS
    # shellcheck disable=SC2086
    timeout -s INT "$VERIFY_S" .venv/bin/fx-conformance verify $args --seed 0 --repro-dir /tmp/repro/"$name" \
        >/tmp/vlog/"$name".log 2>&1
    local rc=$?
    printf '%s\t%s\t%s\t%ss\t%s\n' "$name" "$want" "$rc" $((SECONDS - t0)) "$(grep -m1 -E 'changed|vacuous' /tmp/vlog/"$name".log | head -c 160)"
}
export -f one_verify; export VERIFY_S
mkdir -p /tmp/vlog /tmp/repro

# The device table first, alone and timed (every later process reads it from the cache): which
# (row, dtype) killed or hung its probing process, or left a CUDA error, is printed.
PROBE_S=${PROBE_S:-120}
timeout -s INT "$PROBE_S" .venv/bin/python - <<'PY' 2>&1 | tee "$OUT/probe.txt"
import time
from strategies import _device
t = time.time()
s = _device.support_for("cuda")
print(f"probe: {time.time() - t:.1f} s, {len(s.rows)} rows, {sum(map(len, s.refused_dtypes.values()))} refused dtypes, "
      f"{len(s.refused_calls)} refused calls")
for row, dtypes in sorted(s.refused_dtypes.items()):
    for dtype, err in dtypes.items():
        if any(w in err for w in ("its process", "CUDA error", "did not finish")):
            print("  ", row, dtype, err[:200])
PY

# make test's first pytest line, less its CPU-capability reruns (a CPU matter, not the GPU's)
timeout -s INT "$PYTEST_S" .venv/bin/python -m pytest ${PYTEST_PATHS:-tests benchmarks conformance/suite} -q -p no:cacheprovider \
    --dist worksteal --hypothesis-profile=fx-ci -n "$WORKERS" -m "not sweep" --benchmark-disable -rfE \
    --durations=25 --junitxml="$OUT/junit.xml" >"$OUT/pytest.log" 2>&1 &
PYTEST_PID=$!

printf '%s\n' "${RUNS[@]}" | grep -E "${ONLY:-.}" | xargs -P "$VERIFY_JOBS" -I{} bash -c 'one_verify "$@"' _ {} >"$OUT/verify.tsv"
for f in /tmp/vlog/*.log; do echo "=== $f"; tail -n 40 "$f"; done >"$OUT/verify.log"
echo "verify: name / expected / got / time / fire line"
awk -F'\t' '{ok = ($2 == $3) ? "ok " : "BAD"; print ok, $0}' "$OUT/verify.tsv" | sort

wait "$PYTEST_PID"; echo "pytest exit: $?"
tar czf "$OUT/devices.tgz" -C "$FX_CONFORMANCE_CACHE" devices 2>/dev/null || true
tail -n 60 "$OUT/pytest.log"
