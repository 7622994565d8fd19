"""Codegen of one kernel: a set of pointwise nodes over one iteration space -> Triton source.

The body is straight-line code: one load per operand tensor, one statement per distinct expression
(common subexpressions share a temporary), one store per output. Nothing is allocated inside; the
caller gives the output buffers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import sympy
import torch
import torch.fx as fx
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from .._errors import LoweringError
from . import _index as ix
from ._helpers import helper_name, helper_sources
from ._correct_rounding import correctly_rounded
from ._table import ALWAYS_BOOL, BOOL_TO_LONG, INT_TO_FLOAT, SELF, TRITON
from ._types import NARROW_FLOATS, TL, Value, arithmetic, check_dtype, constant, convert, narrowed, register


@dataclass(frozen=True)
class TensorInfo:
    """What eager produced at a node (or was given at an input): layout, dtype and device."""

    shape: tuple
    stride: tuple
    dtype: torch.dtype
    device: torch.device

    @staticmethod
    def of(t: torch.Tensor) -> "TensorInfo":
        return TensorInfo(tuple(t.shape), tuple(t.stride()), t.dtype, t.device)


@dataclass(frozen=True)
class Arg:
    """A runtime scalar argument of a dynamic kernel: ``kind`` "size" or "stride" of operand
    ``tensor`` (an index into the kernel's inputs) at ``dim``."""

    name: str
    kind: str
    tensor: int
    dim: int


@dataclass(frozen=True)
class KernelSource:
    """What codegen made: the module text and everything a launcher needs to call it."""

    name: str
    source: str
    n_inputs: int
    sizes: tuple  # the iteration space: ints, or sympy symbols (ks<d>) when dynamic
    numel: sympy.Expr
    block: int
    args: tuple  # Arg rows, in signature order after the pointers
    outputs: tuple  # (sizes, strides as sympy of the ks symbols, dtype) per output
    dynamic: bool = False
    in_dtypes: tuple = ()  # the inputs' dtypes, in pointer order (what a compile for a target needs)
    num_warps: int = 4  # launch configuration beside ``block`` (the interpreter ignores it)
    axes: tuple = ()  # (index symbol, dims outer -> inner) per axis: one flat xindex, or (yindex, xindex) tiles
    tile: tuple = ()  # a 2-D tile: (x extent, y extent, YBLOCK); the grid is (cdiv(x, XBLOCK), cdiv(y, YBLOCK))
    accesses: tuple = field(default=())  # ("load"|"store", offset, sizes, strides) per pointer: what the
    # symbolic suite proves in bounds; offsets are in the dim symbols x<d> (see _index.dim_index)


def schema_args(node: fx.Node) -> dict:
    """The call's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    out = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            out[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


def unsupported_reason(node: fx.Node) -> str | None:
    """Why ``node`` cannot go into a pointwise kernel, or None."""
    if node.op != "call_function":
        return f"op={node.op} (only call_function nodes can be fused)"
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return "not an ATen OpOverload"
    if target._schema.is_mutable:
        return "it mutates an operand (functionalize the graph first)"
    row = TRITON.get(target)
    if row is None:
        if torch.Tag.pointwise in target.tags:
            return "a pointwise op without a row in reference_lowering.pointwise.TRITON"
        return "not a pointwise op (reductions, views and other ops stay outside kernels)"
    if row.unsupported is not None:
        why = row.unsupported(schema_args(node))
        if why:
            return why
    return None


class _Op:
    """What a table row sees: converted operands by schema name, the raw arguments, constants and
    helpers in the common dtype."""

    def __init__(self, gen: "_Codegen", args: dict, operands: dict, dtype: torch.dtype):
        self._gen, self._args, self._operands, self.dtype = gen, args, operands, dtype
        self.is_float = dtype.is_floating_point

    @property
    def triton_type(self) -> str:
        return TL[arithmetic(self.dtype)]

    def name(self, expr: str) -> str:
        """A temporary for ``expr``, so an expression used twice is computed once."""
        return self._gen.name(expr)

    def __getattr__(self, name):
        try:
            return self.__dict__["_operands"][name]
        except KeyError:
            raise AttributeError(name) from None

    def get(self, name):
        return self._operands.get(name)

    def arg(self, name, default=None):
        value = self._args.get(name, default)
        return default if value is None else value

    def tensor(self, name) -> bool:
        return isinstance(self._args.get(name), fx.Node)

    def scalar(self, name):
        value = self._args.get(name)
        return None if isinstance(value, fx.Node) else value

    def const(self, value) -> str:
        return constant(value, self.dtype)

    @property
    def block_shape(self) -> str:
        return self._gen.block_shape

    def helper(self, name: str) -> str:
        return helper_name(name, arithmetic(self.dtype))

    @property
    def interpreter(self) -> bool:
        """Whether the kernel is for the Triton interpreter (CPU tensors) rather than a GPU: eager's
        CPU and CUDA kernels differ in a few forms (f16 ``pow`` by 0.5)."""
        return self._gen.interpreter


class _Codegen:
    def __init__(self, block_shape: str = "[XBLOCK]", interpreter: bool = True):
        self.lines, self.cse, self.count = [], {}, 0
        self.block_shape = block_shape  # of every value: "[XBLOCK]", or "[YBLOCK, XBLOCK]" in a 2-D tile
        self.interpreter = interpreter

    def name(self, expr: str) -> str:
        """A temporary holding ``expr`` (the same one for the same expression)."""
        if expr.isidentifier():
            return expr
        if expr not in self.cse:
            self.cse[expr] = f"tmp{self.count}"
            self.count += 1
            self.lines.append(f"{self.cse[expr]} = {expr}")
        return self.cse[expr]

    def value(self, v: Value) -> Value:
        return Value(self.name(v.expr), v.held, v.dtype)


def _common_dtype(row, kind, args: dict, info: dict) -> torch.dtype:
    present = [args[n] for n in row.promote if args.get(n) is not None]
    if kind == SELF:
        return info[args[row.promote[0]]].dtype
    fakes = [torch.empty(info[a].shape, dtype=info[a].dtype, device="meta") if isinstance(a, fx.Node) else a
             for a in present]
    common, _ = elementwise_dtypes(*fakes, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH)
    if kind == INT_TO_FLOAT and not common.is_floating_point:
        common = torch.get_default_dtype()
    if kind == BOOL_TO_LONG and common == torch.bool:
        common = torch.int64
    return common


def generate(nodes: list, inputs: list, outputs: list, info: dict, *, dynamic: bool = False,
             interpreter: bool = True) -> KernelSource:
    """The kernel computing ``outputs`` (nodes among ``nodes``, all of one shape) from ``inputs``.

    ``nodes`` are pointwise call_function nodes in topological order; ``inputs`` the tensor nodes they
    read that are not among them; ``info`` maps every node to its TensorInfo.
    """
    shape = info[outputs[0]].shape
    for out in outputs:
        if info[out].shape != shape:
            raise LoweringError(f"outputs %{outputs[0].name} shape={list(shape)} and %{out.name} "
                                f"shape={list(info[out].shape)}, but a kernel has one iteration space")
    for node in [*inputs, *outputs]:
        check_dtype(info[node].dtype, f"at %{node.name}")
    rank = len(shape)
    sizes = tuple(ix.size_symbol(d) if dynamic and shape[d] != 1 else sympy.Integer(shape[d]) for d in range(rank))
    numel = ix.product(sizes)
    if numel == 0:  # never launched; index as if the empty dims had one element
        sizes = tuple(sympy.Integer(max(1, int(s))) for s in sizes)
    args = [Arg(f"ks{d}", "size", *_size_source(inputs, info, shape, d)) for d in range(rank)
            if dynamic and shape[d] != 1]
    widest = max(info[n].dtype.itemsize * 8 for n in [*inputs, *outputs])
    axes = ix.flat_axes(rank) if dynamic or numel == 0 else _axes(inputs, outputs, info, shape)
    tile = ()
    if len(axes) == 2:
        x_extent = ix.product([sizes[d] for d in axes[1][1]])
        block, yblock, num_warps = tile_config(int(x_extent), int(numel // x_extent), interpreter)
        tile = (x_extent, numel // x_extent, yblock)
    else:
        block, num_warps = launch_config(int(numel) if not dynamic else None, interpreter, widest)
    block_shape = "[YBLOCK, XBLOCK]" if tile else "[XBLOCK]"
    gen = _Codegen(block_shape, interpreter)
    env, accesses = {}, []

    for i, node in enumerate(inputs):
        t = info[node]
        strides = tuple(ix.stride_symbol(i, j) if dynamic and t.shape[j] != 1 else sympy.Integer(t.stride[j])
                        for j in range(len(t.shape)))
        args += [Arg(f"in{i}_st{j}", "stride", i, j) for j in range(len(t.shape)) if dynamic and t.shape[j] != 1]
        in_shape = tuple(sizes[j + rank - len(t.shape)] if t.shape[j] != 1 else 1 for j in range(len(t.shape)))
        off = ix.offset(sizes, in_shape, strides, axes)
        accesses.append(("load", off, in_shape, strides))
        if off.is_Integer:  # a broadcast scalar: one unmasked load, then a block of it
            loaded = gen.name(f"tl.load(in_ptr{i} + {ix.pexpr(off)})")
            loaded = gen.name(f"tl.broadcast_to({loaded}, {block_shape})")
        else:
            loaded = gen.name(f"tl.load(in_ptr{i} + {_paren(off)}, xmask)")
        if t.dtype == torch.bfloat16:
            env[node] = Value(gen.name(f"bf16_widen_f32({loaded})"), torch.float32, t.dtype)
        elif t.dtype == torch.float16:
            env[node] = Value(gen.name(f"{loaded}.to(tl.float32)"), torch.float32, t.dtype)
        else:
            env[node] = Value(loaded, t.dtype, t.dtype)

    for node in nodes:
        env[node] = _emit(gen, node, env, info)

    out_specs, stores = [], []
    for j, node in enumerate(outputs):
        t = info[node]
        if dynamic:
            order = ix.stride_order(t.shape, t.stride)
            strides = ix.dense_strides(sizes, order)
        else:
            strides = tuple(sympy.Integer(s) for s in t.stride)
        out_specs.append((tuple(t.shape) if numel == 0 else sizes, strides, t.dtype))
        off = ix.offset(sizes, tuple(sizes), strides, axes)
        accesses.append(("store", off, tuple(sizes), strides))
        v = env[node]
        stored = v.expr if v.held == register(t.dtype) else f"{v.expr}.to({TL[register(t.dtype)]})"
        if t.dtype == torch.float16:
            stored = f"{v.expr}.to(tl.float16)"
        elif t.dtype == torch.bfloat16:
            stored = f"bf16_narrow_f32({v.expr})"
        stores.append(f"tl.store(out_ptr{j} + {_paren(off)}, {stored}, xmask)")

    used_dims = sorted({int(s.name[1:]) for _, e, _, _ in accesses for s in e.free_symbols
                        if s.name.startswith("x") and s.name[1:].isdigit()})
    wide = dynamic or not ix.fits_int32(int(numel), [(info[n].shape, info[n].stride) for n in [*inputs, *outputs]])
    pid = [f"tl.program_id({a}).to(tl.int64)" if wide else f"tl.program_id({a})" for a in (0, 1)]
    if tile:
        x_extent, y_extent, _ = tile
        head = [f"yoffset = {pid[1]} * YBLOCK", "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]",
                f"xoffset = {pid[0]} * XBLOCK", "xindex = xoffset + tl.arange(0, XBLOCK)[None, :]",
                f"xmask = (xindex < {ix.pexpr(x_extent)}) & (yindex < {ix.pexpr(y_extent)})"]
    else:
        # a static size that is a multiple of the block needs no mask (fewer instructions, wider accesses)
        full = not dynamic and int(numel) % block == 0
        head = [f"xoffset = {pid[0]} * XBLOCK", "xindex = xoffset + tl.arange(0, XBLOCK)",
                "xmask = tl.full([XBLOCK], True, tl.int1)" if full else
                f"xmask = xindex < {'xnumel' if dynamic else ix.pexpr(numel)}"]
    head += [f"x{d} = {ix.pexpr(ix.dim_index(sizes, d, axes))}" for d in used_dims]
    params = [f"in_ptr{i}" for i in range(len(inputs))] + [f"out_ptr{j}" for j in range(len(outputs))]
    params += [a.name for a in args] + (["xnumel"] if dynamic else []) + ["XBLOCK: tl.constexpr"]
    params += ["YBLOCK: tl.constexpr"] if tile else []
    body = "\n".join("    " + line for line in [*head, *gen.lines, *stores])
    helpers = helper_sources(body, interpreter)
    digest = hashlib.sha1(("\n".join(params) + body + "\n".join(helpers)).encode()).hexdigest()
    name = f"pointwise_{digest[:12]}"
    imports = "import triton\nimport triton.language as tl" + (
        "\nfrom triton.language.extra import libdevice" if any("libdevice." in h for h in helpers) else "")
    source = "\n\n\n".join([imports, *helpers,
                            f"@triton.jit\ndef {name}({', '.join(params)}):\n{body}"]) + "\n"
    return KernelSource(name=name, source=source, n_inputs=len(inputs), sizes=tuple(shape) if numel == 0 else sizes,
                        numel=numel, block=block, num_warps=num_warps, in_dtypes=tuple(info[n].dtype for n in inputs),
                        args=tuple(args), outputs=tuple(out_specs), dynamic=dynamic, accesses=tuple(accesses),
                        axes=axes, tile=tile)


def _axes(inputs, outputs, info, shape) -> tuple:
    """How the kernel walks its space (static kernels). Every operand that covers the whole space has a
    stride-1 dim; where they all agree, one flat index walks the dims in the first output's memory
    order (a transposed output is written in order, not at a stride). Where they disagree, a 2-D
    tile: ``xindex`` walks the first output's stride-1 dim, ``yindex`` the other dims with the
    stride-1 dim of the biggest disagreeing operand innermost, so each access is contiguous along
    one tile axis (Triton moves the other through shared memory)."""
    rank = len(shape)
    order = tuple(reversed(ix.stride_order(shape, info[outputs[0]].stride)))  # outer -> inner
    order = tuple(d for d in order if shape[d] == 1) + tuple(d for d in order if shape[d] != 1)
    units = {}
    for node in [*inputs, *outputs]:
        t = info[node]
        if tuple(t.shape) != tuple(shape) or any(st == 0 and sz != 1 for sz, st in zip(t.shape, t.stride)):
            continue  # broadcast operands (by shape or by a stride 0) are served by the cache, not tiled for
        unit = next((d for d in range(rank) if t.stride[d] == 1 and shape[d] != 1), None)
        if unit is not None:
            units[node] = unit
    x_dim = units.get(outputs[0])
    others = sorted((n for n in units if units[n] != x_dim), key=lambda n: -info[n].dtype.itemsize)
    if x_dim is None or not others:
        return ((ix.XINDEX, order),)
    y_dim = units[others[0]]
    y_dims = tuple(d for d in order if d not in (x_dim, y_dim)) + (y_dim,)
    return ((ix.YINDEX, y_dims), (ix.XINDEX, (x_dim,)))


# A 2-D tile on a GPU: 32 x 32 (x is the output's stride-1 dim), 4 warps, what Inductor picks for a
# transposed pointwise op; the interpreter gets one wide tile per program.
TILE, TILE_WARPS, MAX_Y_PROGRAMS = 32, 4, 65535


def tile_config(x_extent: int, y_extent: int, interpreter: bool) -> tuple:
    """``(XBLOCK, YBLOCK, num_warps)`` of a 2-D tile kernel."""
    if interpreter:
        x = min(ix.next_power_of_2(x_extent), INTERPRETER_BLOCK)
        y = min(ix.next_power_of_2(y_extent), max(1, INTERPRETER_BLOCK // x))
    else:
        x, y = min(TILE, ix.next_power_of_2(x_extent)), min(TILE, ix.next_power_of_2(y_extent))
    while -(-y_extent // y) > MAX_Y_PROGRAMS:  # the grid's y dimension is limited
        y *= 2
    return x, y, max(1, min(TILE_WARPS, x * y // 256))


def _paren(e: sympy.Expr) -> str:
    text = ix.pexpr(e)
    return text if text.isidentifier() or text.startswith("(") and text.endswith(")") else f"({text})"


def _size_source(inputs, info, shape, d) -> tuple:
    """An input (and its dim) whose size at iteration dim ``d`` is that dim's size at run time."""
    for i, node in enumerate(inputs):
        t = info[node]
        j = d - (len(shape) - len(t.shape))
        if j >= 0 and t.shape[j] == shape[d]:
            return i, j
    raise LoweringError(f"no input of the kernel has the iteration size {shape[d]} at dim {d}")


# Compiled code: at most 1024 elements per program, one program just covering a small tensor, and
# 256 bits per thread of the widest dtype (two 128-bit accesses: 8 fp32 or 4 fp64 elements), what
# Inductor's pointwise heuristic gives fp32 in one dimension. A 65536-wide program needs a 7 KB stack
# per thread on sm_90 (measured: tests/test_gpu_targets.py plants it).
GPU_BLOCK, BITS_PER_THREAD, MAX_WARPS = 1024, 256, 8
# The interpreter pays ~1.6 ms per program instance, so it gets few, wide programs.
INTERPRETER_BLOCK = 65536


def launch_config(numel, interpreter: bool, widest_bits: int = 32) -> tuple:
    """``(XBLOCK, num_warps)`` for ``numel`` elements (``None``: a dynamic kernel, any size) whose
    widest operand has ``widest_bits``."""
    if numel is None:
        block = GPU_BLOCK
    else:
        block = max(16, min(INTERPRETER_BLOCK if interpreter else GPU_BLOCK, ix.next_power_of_2(numel)))
    per_warp = 32 * max(1, BITS_PER_THREAD // max(32, widest_bits))  # f16/bf16 compute in fp32
    return block, max(1, min(MAX_WARPS, block // per_warp))


def _emit(gen: _Codegen, node: fx.Node, env: dict, info: dict) -> Value:
    row = TRITON[node.target]
    args = schema_args(node)
    kind = row.kind(args) if callable(row.kind) else row.kind
    common = _common_dtype(row, kind, args, info)
    expected = torch.bool if kind == ALWAYS_BOOL else common
    result = info[node].dtype
    if kind != SELF and expected != result:
        raise LoweringError(f"type promotion of %{node.name} ({node.target}) gave {expected}, but eager gives "
                            f"{result} [reference_lowering.pointwise.TRITON]")
    operands = {}
    for name in row.promote:
        a = args.get(name)
        if a is None:
            continue
        if isinstance(a, fx.Node):
            operands[name] = gen.value(convert(env[a], common, arith=True)).expr
        else:
            operands[name] = constant(a, common, rounded=row.rounds_scalars)
    for name in row.masks:
        operands[name] = gen.value(convert(env[args[name]], torch.bool)).expr
    try:
        expr = row.emit(_Op(gen, args, operands, common))
    except (ValueError, KeyError, TypeError) as exc:
        raise LoweringError(f"%{node.name} ({node.target}) cannot be lowered: {exc}") from None
    expr = correctly_rounded(expr, arithmetic(common))
    # A predicate is a bool; bool arithmetic is int8 (True + True == 2) until converted to the result.
    held = torch.bool if row.returns == "bool" else arithmetic(common)
    # a row that selects among f16/bf16 operands already rounded (relu, clamp, maximum, abs) gives a
    # value of their dtype: rounding it again changes no bit and costs instructions
    exact = row.selects and common in NARROW_FLOATS and all(
        isinstance(args.get(name), fx.Node) or _exact_in(args.get(name), common) for name in row.promote)
    raw = Value(gen.name(expr), held, common if exact else held)
    return gen.value(convert(raw, result))


def _exact_in(value, dtype: torch.dtype) -> bool:
    """Whether the scalar ``value`` (None: not given) is a value of ``dtype`` (NaN and infinities are)."""
    if value is None:
        return True
    if not isinstance(value, (bool, int, float)):
        return False
    try:
        as_float = float(value)
    except OverflowError:  # an int past every float
        return False
    return as_float != as_float or narrowed(as_float, dtype) == as_float
