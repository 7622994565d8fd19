"""Kernels compiled for GPU targets on a machine without a GPU, judged by what the binary shows.

Triton compiles a ``@triton.jit`` function for a named ``GPUTarget`` with no driver: the wheel
ships ``ptxas``, ``cuobjdump`` and the AMD back end. This module compiles a kernel for ``sm_90``,
``sm_80`` or ``gfx942`` and reads, from the binary and its assembly, the figures a GPU engineer
looks at: registers, local memory (spills) and stack, shared memory, instruction count, and the
width of every global load and store, attributed to the pointer argument it goes through.

Kernels lowered for a GPU (or the ``meta`` device) compile, in any process where the user did not
set ``TRITON_INTERPRET`` (a function decorated under it is interpreted, and cannot be compiled);
CPU lowerings in the same process do not change that. Compiling does not launch anything.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import sympy
import torch

from .._errors import LoweringError

# name -> (backend, arch, warp size): the targets CI compiles for
TARGETS = {"sm_90": ("cuda", 90, 32), "sm_80": ("cuda", 80, 32), "gfx942": ("hip", "gfx942", 64)}

TRITON_TYPES = {
    torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
    torch.int8: "i8", torch.uint8: "u8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
    torch.bool: "i1",
}


@dataclass(frozen=True)
class Access:
    """One global load or store instruction: which pointer argument (its index in the signature, or
    -1 when the address does not come from exactly one) and how many bits it moves."""

    kind: str  # "load" | "store"
    pointer: int
    bits: int


@dataclass(frozen=True)
class StaticFigures:
    """What one compiled kernel shows, per target. ``registers`` are 32-bit registers per thread
    (AMD: VGPRs), ``local_bytes`` local memory per thread (spills: generated kernels have no local
    arrays), ``stack_bytes`` the call stack, ``shared_bytes`` what the kernel asks for (Triton's
    figure; layout conversions through shared memory show here), ``instructions`` machine
    instructions (SASS without NOPs; AMDGCN to ``s_endpgm``)."""

    kernel: str
    target: str
    num_warps: int
    registers: int
    local_bytes: int
    stack_bytes: int
    shared_bytes: int
    instructions: int
    accesses: tuple = field(default=())
    compile_s: float = 0.0
    listed: int | None = None  # instructions as ``cuobjdump -sass`` lists them (only when asked: 330 ms)

    def widths(self, kind: str, pointer: int | None = None) -> Counter:
        """Bits per instruction -> how many ``kind`` ("load"/"store") instructions, all or one pointer's."""
        return Counter(a.bits for a in self.accesses if a.kind == kind and (pointer is None or a.pointer == pointer))

    def as_dict(self) -> dict:
        per_pointer = defaultdict(lambda: {"load": Counter(), "store": Counter()})
        for a in self.accesses:
            per_pointer[a.pointer][a.kind][a.bits] += 1
        return {"kernel": self.kernel, "target": self.target, "num_warps": self.num_warps,
                "registers": self.registers, "local_bytes": self.local_bytes, "stack_bytes": self.stack_bytes,
                "shared_bytes": self.shared_bytes, "instructions": self.instructions,
                "compile_s": round(self.compile_s, 4), "listed": self.listed,
                "accesses": {str(p): {k: {str(b): n for b, n in sorted(c.items())} for k, c in v.items()}
                             for p, v in sorted(per_pointer.items())}}


def signature(code, values: dict | None = None) -> tuple:
    """``(signature, constexprs, aligned)`` of a generated kernel (a ``KernelSource``) as a launch
    specialises it: pointers typed by dtype; each size, stride and ``xnumel`` argument a constexpr
    where its value is 1, else ``i32``/``i64`` by value, marked divisible by 16 where it is;
    ``XBLOCK`` a constexpr. ``values`` gives those arguments' values (a dynamic kernel needs them)."""
    sig = {f"in_ptr{i}": f"*{TRITON_TYPES[d]}" for i, d in enumerate(code.in_dtypes)}
    sig.update({f"out_ptr{j}": f"*{TRITON_TYPES[d]}" for j, (_, _, d) in enumerate(code.outputs)})
    aligned = list(sig)  # fresh allocations
    scalars = [a.name for a in code.args] + (["xnumel"] if code.dynamic else [])
    missing = [s for s in scalars if values is None or s not in values]
    if missing:
        raise LoweringError(f"{code.name} takes {', '.join(missing)} at launch: pass values= (e.g. "
                            f"kernel.scalar_args(inputs)) to compile it as a launch would")
    constexprs = {}
    for name in scalars:
        v = int(values[name])
        if v == 1:
            sig[name], constexprs[name] = "constexpr", 1
        else:
            sig[name] = "i32" if -2 ** 31 <= v < 2 ** 31 else "i64"
            if v % 16 == 0:
                aligned.append(name)
    sig["XBLOCK"] = "constexpr"
    if code.tile:
        sig["YBLOCK"] = "constexpr"
    return sig, constexprs, tuple(aligned)


def compile_for_target(kernel, target: str, values: dict | None = None, *, disassemble: bool = False) -> StaticFigures:
    """A ``PointwiseKernel`` made for a GPU-path device (``meta``, or a GPU) compiled for ``target``
    as a launch on fresh tensors would compile it (``values``: its size arguments, for a dynamic
    kernel), with its own launch configuration and options; its figures."""
    from ._runtime import launch_options

    code = kernel.code
    options = launch_options(code)
    blocks = {k: options.pop(k) for k in ("XBLOCK", "YBLOCK") if k in options}
    sig, constexprs, aligned = signature(code, values)
    constexprs.update(blocks)
    compiled, seconds = compile_triton(kernel.fn, sig, constexprs, target, num_warps=options.pop("num_warps"),
                                       aligned=aligned, options=options)
    return figures(compiled, target, sum(1 for t in sig.values() if t.startswith("*")), seconds,
                   disassemble=disassemble)


def expected_elements(code, warp_size: int = 32, values: dict | None = None) -> tuple:
    """Per pointer, the fewest elements each of its global accesses should move, judged from the
    operand's layout alone (not from the kernel's index expressions): ``min(elements per thread,
    128 bits)``, cut to the largest power of two dividing its contiguous run (from its stride-1 dim
    outwards while the dims are dense) and every other stride. 1 where no dim has stride 1 (a
    broadcast scalar). A kernel below it reads or writes an operand in a pattern a GPU engineer would
    send back, whatever the reason (a flat index over a transposed operand walks its stride). A
    dynamic kernel is judged as a launch with ``values`` specialises it: an argument of 1 is that
    constant, one divisible by 16 is known to be."""
    per_thread = elements_per_thread(code, warp_size)
    # where the operands' stride-1 dims disagree no one order walks them all: each one's run is its
    # stride-1 dim alone (what a 2-D tile gives it)
    # (full-size operands only, as the codegen's ``_axes`` counts them: no broadcast dim, no stride 0)
    units = {next((d for d, (size, st) in enumerate(zip(shape, strides)) if st == 1 and size != 1), None)
             for _, _, shape, strides in code.accesses if len(shape) == len(code.sizes)
             and all(size != 1 or code.sizes[d] == 1 for d, size in enumerate(shape))
             and not any(st == 0 and size != 1 for size, st in zip(shape, strides))} - {None}
    one = {k for k, v in (values or {}).items() if v == 1}

    def specialised(e):  # an argument of 1 is the constant 1 in the compiled kernel
        e = sympy.sympify(e)
        return e.xreplace({sym: 1 for sym in e.free_symbols if sym.name in one})

    known = {k: 16 if v % 16 == 0 else 1 for k, v in (values or {}).items()}
    dtypes = [*code.in_dtypes, *(d for _, _, d in code.outputs)]
    out = []
    for (_, _, shape, strides), dtype in zip(code.accesses, dtypes):
        cap = min(per_thread, 128 // (dtype.itemsize * 8))
        lead = len(code.sizes) - len(shape)
        dims = [(lead + j, specialised(size), specialised(stride))
                for j, (size, stride) in enumerate(zip(shape, strides)) if size != 1]
        dims = [(d, size, stride) for d, size, stride in dims if stride != 0]
        unit = next((d for d, _, stride in dims if stride == 1), None)
        # broadcast along a dim inside its stride-1 dim (a column of a matrix): neighbouring elements of
        # the space read one element, which the cache serves; nothing to vectorize
        if unit is None or any(code.sizes[q] != 1 for q in range(unit + 1, len(code.sizes))
                               if q - lead < 0 or shape[q - lead] == 1):
            out.append(1)
            continue
        dims = [(size, stride) for _, size, stride in dims]
        run, rest = sympy.Integer(1), list(dims)
        while True:
            step = next((d for d in rest if sympy.expand(d[1] - run) == 0), None)
            if step is None:
                break
            rest.remove(step)
            run = run * step[0]
            if len(units) > 1:
                break
        out.append(1 if run == 1 else _pow2_dividing(cap, [run, *(stride for _, stride in rest)], known))
    return tuple(out)


def elements_per_thread(code, warp_size: int = 32) -> int:
    """Elements each thread of a launch of ``code`` (a ``KernelSource``) handles."""
    return max(1, code.block * (code.tile[2] if code.tile else 1) // (code.num_warps * warp_size))


def _pow2_dividing(cap: int, values, known: dict) -> int:
    w = 1
    while w * 2 <= cap and all(_divisor(v, known) % (w * 2) == 0 for v in values):
        w *= 2
    return w


def _divisor(value, known: dict) -> int:
    """A power of two known to divide ``value`` (an int, or a product of size symbols)."""
    value = sympy.sympify(value)
    if value.is_Integer:
        return int(value) or 1 << 30
    out = 1
    for factor in sympy.Mul.make_args(value):
        if factor.is_Integer:
            out *= int(factor) & -int(factor)
        elif factor.is_Symbol:
            out *= known.get(factor.name, 1)
        else:
            return 1
    return out


def gpu_target(name: str):
    from triton.backends.compiler import GPUTarget

    if name not in TARGETS:
        raise LoweringError(f"target={name!r}, but should be one of {', '.join(TARGETS)}")
    return GPUTarget(*TARGETS[name])


def compile_triton(fn, signature: dict, constexprs: dict, target: str, *, num_warps: int = 4,
                   aligned: tuple = (), options: dict | None = None, attrs: dict | None = None):
    """``triton.compile`` of the JIT function ``fn`` for ``target``. ``signature`` maps every
    argument to a Triton type (``"*fp32"``, ``"i32"``, ``"constexpr"``); pointers (and ints) named in
    ``aligned`` are specialised as 16-byte aligned (divisible by 16), as a launch on fresh
    allocations is (``attrs``: Triton's own form, ``{(index,): [["tt.divisibility", 16]]}``, instead).
    Returns ``(CompiledKernel, seconds)``."""
    import triton
    from triton.compiler import ASTSource

    if _interpreted(fn):
        raise LoweringError(f"{getattr(fn, '__name__', fn)} is an interpreted kernel (lowered for the CPU, or under "
                            f"TRITON_INTERPRET=1) and cannot be compiled for a GPU: lower it for a GPU device "
                            f"(or 'meta'), in a process without TRITON_INTERPRET set")
    names = list(signature)
    attrs = attrs if attrs is not None else {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    src = ASTSource(fn, signature, constexprs=constexprs, attrs=attrs)
    opts = {"num_warps": num_warps, **(options or {})}
    start = time.perf_counter()
    try:
        compiled = triton.compile(src, target=gpu_target(target), options=opts)
    except Exception as exc:  # Triton's compile errors come from several layers (MLIR, ptxas, LLVM)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise LoweringError(f"{fn.__name__} does not compile for {target}: {type(exc).__name__}: {first}") from exc
    return compiled, time.perf_counter() - start


def figures(compiled, target: str, pointers: int, seconds: float = 0.0, *, disassemble: bool = False) -> StaticFigures:
    """Read ``compiled`` (a ``CompiledKernel`` for ``target``); the first ``pointers`` parameters are
    the pointer arguments global accesses are attributed to."""
    name = compiled.metadata.name
    num_warps = compiled.metadata.num_warps
    if TARGETS[target][0] == "cuda":
        usage, count = _cuda_usage(compiled.asm["cubin"], name)
        return StaticFigures(name, target, num_warps, usage["REG"], usage["LOCAL"], usage["STACK"],
                             compiled.metadata.shared, count, _ptx_accesses(compiled.asm["ptx"], pointers), seconds,
                             len(sass(compiled.asm["cubin"])) if disassemble else None)
    text = compiled.asm["amdgcn"]
    meta = _amd_meta(text)
    return StaticFigures(name, target, num_warps, meta["vgpr_count"], meta["private_segment_fixed_size"], 0,
                         compiled.metadata.shared, _amd_instructions(text, name), _amd_accesses(text), seconds)


def _interpreted(fn) -> bool:
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(fn, InterpretedFunction)


# --- NVIDIA: cuobjdump for resources and SASS, PTX for accesses -------------------------------------

def _tool(name: str) -> str:
    from triton import knobs

    return getattr(knobs.nvidia, name).path


def _cuda_usage(cubin: bytes, name: str) -> tuple:
    """``({REG, STACK, LOCAL, SHARED}, SASS instructions)``: resources from ``cuobjdump -res-usage``
    (2 ms); instructions counted in the ELF's ``.text.<name>``, 16 bytes each on sm_70 and later,
    without NOPs (opcode 0x918), which is what ``sass()`` lists (a disassembly costs 330 ms)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        res = subprocess.run([_tool("cuobjdump"), "-res-usage", path], capture_output=True, text=True, check=True).stdout
    usage = {k: int(v) for k, v in re.findall(r"\b(REG|STACK|LOCAL|SHARED):(\d+)", res)}
    text = _elf_sections(cubin)[f".text.{name}"]
    words = struct.unpack_from(f"<{len(text) // 8}Q", text)[::2]
    return usage, sum(1 for w in words if w & 0xFFF != 0x918)


def _elf_sections(data: bytes) -> dict:
    """Section name -> bytes of a little-endian ELF64 file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]

    def name(offset: int) -> str:
        start = names[4] + offset
        return data[start:data.index(b"\0", start)].decode()

    return {name(h[0]): data[h[4]:h[4] + h[5]] for h in headers}


def sass(cubin: bytes) -> list:
    """The SASS mnemonics of a cubin, NOPs excluded (``cuobjdump -sass``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        text = subprocess.run([_tool("cuobjdump"), "-sass", path], capture_output=True, text=True, check=True).stdout
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", text)
    return [op for op in ops if op.split(".")[0] != "NOP"]


_PTX_ACCESS = re.compile(r"^(?:@!?%p\d+\s+)?(ld|st)\.global((?:\.[\w:]+)*)\s+(.*);$")
_PTX_PARAM = re.compile(r"^ld\.param\.\w+\s+(%\w+),\s*\[\s*\w+_param_(\d+)\s*\]")
_PTX_REG = re.compile(r"%\w+")


def _ptx_accesses(ptx: str, pointers: int) -> tuple:
    """Each ``ld.global``/``st.global`` with its width and the pointer parameter its address derives
    from (a walk back over the registers that define the address; PTX from LLVM defines each virtual
    register once)."""
    defs, params, found = defaultdict(set), {}, []
    for raw in ptx.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", ".", "{", "}", "$")):
            continue
        m = _PTX_PARAM.match(line)
        if m:
            params[m.group(1)] = int(m.group(2))
            continue
        m = _PTX_ACCESS.match(line)
        if m:
            kind, suffixes, operands = m.groups()
            parts = suffixes.split(".")
            vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
            bits = next(int(p[1:]) for p in reversed(parts) if re.fullmatch(r"[bfsu]\d+", p))
            address = re.search(r"\[([^\]]*)\]", operands).group(1)
            found.append(("load" if kind == "ld" else "store", _PTX_REG.findall(address), vec * bits))
            continue
        body = re.sub(r"^@!?%p\d+\s+", "", line).rstrip(";")
        opcode, _, rest = body.partition(" ")
        regs = _PTX_REG.findall(rest)
        if regs and not opcode.startswith(("st.", "bra", "ret", "bar")):  # the first register is the one defined
            defs[regs[0]].update(regs[1:])

    def origin(regs: list) -> int:
        seen, todo, hits = set(), list(regs), set()
        while todo:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            if r in params and params[r] < pointers:
                hits.add(params[r])
            todo.extend(defs.get(r, ()))
        return hits.pop() if len(hits) == 1 else -1

    return tuple(Access(kind, origin(regs), bits) for kind, regs, bits in found)


# --- AMD: the AMDGCN text ----------------------------------------------------------------------------

_AMD_WIDTH = {"dwordx4": 128, "dwordx3": 96, "dwordx2": 64, "dword": 32, "b128": 128, "b96": 96, "b64": 64,
              "b32": 32, "short": 16, "ushort": 16, "sshort": 16, "short_d16": 16, "short_d16_hi": 16, "b16": 16,
              "d16_b16": 16, "d16_hi_b16": 16, "byte": 8, "ubyte": 8, "sbyte": 8, "byte_d16": 8, "ubyte_d16": 8,
              "sbyte_d16": 8, "byte_d16_hi": 8, "ubyte_d16_hi": 8, "sbyte_d16_hi": 8, "b8": 8, "u8": 8, "i8": 8,
              "u16": 16, "i16": 16}


def _amd_meta(text: str) -> dict:
    out = {"vgpr_count": 0, "private_segment_fixed_size": 0}
    for key in out:
        m = re.search(rf"\.{key}:\s+(\d+)", text)
        if m:
            out[key] = int(m.group(1))
    return out


def _amd_body(text: str, name: str) -> list:
    lines, inside = [], False
    for raw in text.splitlines():
        if raw.startswith(f"{name}:"):
            inside = True
            continue
        if inside:
            line = raw.split(";")[0].strip()
            if line and not line.startswith((".", "//")) and not line.endswith(":"):
                lines.append(line)
                if line.startswith("s_endpgm"):
                    break
    return lines


def _amd_instructions(text: str, name: str) -> int:
    return sum(1 for line in _amd_body(text, name) if not line.startswith("s_nop"))


def _amd_accesses(text: str) -> tuple:
    """Global/buffer loads and stores with their widths (attributed to no pointer: AMDGCN has physical
    registers, so ``pointer`` is -1)."""
    out = []
    for m in re.finditer(r"^\s*(global|buffer)_(load|store)_(\w+)", text, re.M):
        width = _AMD_WIDTH.get(m.group(3).removeprefix("lds_"))
        if width is not None:
            out.append(Access("load" if m.group(2) == "load" else "store", -1, width))
    return tuple(out)
