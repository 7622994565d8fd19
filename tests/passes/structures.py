"""Passes whose bugs need a structure around the edge they match (issue 56 item 5), each with a correct
twin and a buggy one, in the shapes of bugs PyTorch's own FX passes shipped and later fixed:

- a CSE keyed on the arguments' values merges ``add(x, 1)`` and ``add(x, 1.0)`` (``1 == 1.0`` and
  their hashes agree), which differ in dtype for an integer ``x``: the same op on one operand with
  scalars of equal value and other type;
- a CSE that merges two reads of a value across a write to it in place: a merge across a write;
- a no-op removal that replaces ``x + 0`` by ``x`` though ``x`` is written in place afterwards:
  a write after a read of the same value;
- a reinplacing pass that turns ``add(e, y)`` into ``add_(e, y)`` where ``e`` is an expanded view of
  an intermediate (elements sharing an address: eager refuses to write it): an in-place-able op on
  an expanded intermediate;
- a view reordering that moves ``view.dtype`` past a ``view``, right only for a dtype of the same
  element size: ``view.dtype`` to another element size;
- a ``mul(x, sigmoid(x))`` -> ``silu(x)`` fusion that hands the silu to the sigmoid's other readers:
  a diamond (one value feeding two consumers the pattern ties together);
- a ``pow(abs(x), 2)`` -> ``mul(x, x)`` rewrite that forgets complex ``x`` (``|x|**2`` is
  ``x * conj(x)``, a real number, where ``x * x`` is a complex one), as norm decompositions that
  squared without ``abs`` did for complex inputs: complex dtypes.

``STRUCTURES`` names each as ``tests/passes/matchers.py``'s ``CORPUS`` does (scripts/matcher_corpus.py
``--corpus structures`` measures them; docs/fire-rates.md has the table). The correct twins keep what
the rewritten node produced and never make an output one with an input or another output.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from tests.passes.matchers import Matcher, _is, _refresh_meta, _rewrite, _val

aten = torch.ops.aten


def _schema(node):
    return getattr(node.target, "_schema", None) if isinstance(node, fx.Node) and node.op == "call_function" else None


def _mutates(node) -> bool:
    schema = _schema(node)
    return schema is not None and schema.is_mutable


def _is_view(node) -> bool:
    schema = _schema(node)
    return schema is not None and not schema.is_mutable and any(r.alias_info is not None for r in schema.returns)


def _returns_alias(node) -> bool:
    """A view or an in-place call: its result is (a view of) its first operand's storage. By its
    schema, or by its ``meta['val']``'s storage where the schema says its result is new and it is
    not (``_unsafe_view`` of a contiguous value is a view of it: the search found this CSE merging
    two duplicates, one returned through such a call, into outputs that share storage)."""
    schema = _schema(node)
    return schema is not None and (any(r.alias_info is not None for r in schema.returns) or _storage_of_first(node))


def _storage_of_first(node) -> bool:
    val, first = node.meta.get("val"), node.args[0] if node.args else None
    other = first.meta.get("val") if isinstance(first, fx.Node) else None
    return isinstance(val, torch.Tensor) and isinstance(other, torch.Tensor) and \
        val.untyped_storage()._cdata == other.untyped_storage()._cdata


def _pure(node) -> bool:
    """A functional ATen call that is no view and draws no random numbers (what a CSE may merge)."""
    schema = _schema(node)
    return (schema is not None and isinstance(node.target, torch._ops.OpOverload) and not schema.is_mutable
            and not _is_view(node) and torch.Tag.nondeterministic_seeded not in node.target.tags)


def _aliases(node) -> set:
    """The nodes sharing ``node``'s storage: up through views and in-place calls (each returns its
    first operand's storage) to the root, then down every such call on it (the getitems of a
    multi-result call count as its own: more than they share, never less)."""
    root = node
    while (_returns_alias(root) or (root.target is operator.getitem and _returns_alias(root.args[0]))) \
            and isinstance(root.args[0], fx.Node):
        root = root.args[0]
    out, todo = set(), [root]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        out.add(n)
        todo += [u for u in n.users if _returns_alias(u) and u.args and u.args[0] is n]
        todo += [u for u in n.users if u.target is operator.getitem]  # a result of a multi-result call
    return out


def _written(node) -> set:
    """What an in-place call writes: its first operand's storage (every alias of it)."""
    return _aliases(node.args[0]) if _mutates(node) and node.args and isinstance(node.args[0], fx.Node) else set()


def _outputs(gm) -> set:
    found: set = set()
    out = next(n for n in gm.graph.nodes if n.op == "output")
    fx.node.map_arg(out.args, found.add)
    return found


def _written_anywhere(gm) -> set:
    """Every node whose storage some in-place call of ``gm`` writes."""
    return set().union(*(_written(m) for m in gm.graph.nodes if _mutates(m)))


def _fresh_for_output(x, outputs: set) -> bool:
    """Whether ``x``'s storage is a call's own and no output's: an output may become ``x``."""
    storage = _aliases(x)
    return not storage & outputs and all(n.op == "call_function" for n in storage)


def _key(value, typed: bool):
    """A hashable form of an argument: nodes as they are, lists as tuples, and scalars with their type
    where ``typed`` (else ``1``, ``1.0`` and ``True`` are one key: they are equal and hash alike)."""
    if isinstance(value, (list, tuple)):
        return tuple(_key(v, typed) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key(v, typed)) for k, v in value.items()))
    if typed and isinstance(value, (bool, int, float)):
        return (type(value), value)
    return value


# --- 1, 2. common-subexpression elimination --------------------------------------------------------------


def _cse(typed: bool, across_writes: bool):
    """Merge a pure call into an earlier one of the same target and arguments. ``typed``: scalars of
    another type are other arguments. ``across_writes``: an entry survives a write, in place, to one
    of its operands or to its result (else a write drops every entry it touches). Two outputs are
    never merged into one (they would share a tensor the original gave as two), nor a call whose
    result is written in place (the write would reach the other's readers)."""
    def run(gm):
        g = gm.graph
        outputs, written = _outputs(gm), _written_anywhere(gm)
        seen: dict = {}
        for n in list(g.nodes):
            if _mutates(n):
                if not across_writes:
                    hit = _written(n)
                    seen = {k: v for k, v in seen.items() if not hit & (_aliases(v) | set(v.all_input_nodes))}
                continue
            if not _pure(n) or n in written:
                continue
            key = (n.target, _key(n.args, typed), _key(n.kwargs, typed))
            try:
                earlier = seen.get(key)
            except TypeError:  # an unhashable argument
                continue
            if earlier is None:
                seen[key] = n
            elif not (_aliases(n) & outputs and _aliases(earlier) & outputs):
                if n in outputs:
                    outputs.add(earlier)
                n.replace_all_uses_with(earlier)
                g.erase_node(n)
        g.eliminate_dead_code()
        gm.recompile()
        return gm
    return run


def cse(gm):
    return _cse(True, False)(gm)


def cse_keyed_on_values(gm):
    """Buggy: keys the arguments by value, so ``add(x, 1)`` and ``add(x, 1.0)`` are one call."""
    return _cse(False, False)(gm)


def cse_across_writes(gm):
    """Buggy: merges across a write, in place, to the merged call's operand."""
    return _cse(True, True)(gm)


# --- 3. x + 0, x - 0, x * 1, x / 1 -> x --------------------------------------------------------------------

_NOOPS = {aten.add.Tensor: 0, aten.add.Scalar: 0, aten.sub.Tensor: 0, aten.sub.Scalar: 0, aten.mul.Tensor: 1,
          aten.mul.Scalar: 1, aten.div.Tensor: 1, aten.div.Scalar: 1}


def _noop_removal(check_writes: bool):
    """``x op c`` with the op's identity scalar ``c`` (no alpha) is ``x`` where the result's dtype,
    shape and strides are ``x``'s; not where the result (or a view of it: the search found this twin
    returning ``squeeze(x0)`` for ``squeeze(x0 * 1.0)``) is an output and ``x``'s storage is an
    input's, a constant's or another output's (they would come to share it), or is written in place (the write would reach ``x``), and, with ``check_writes``, not where ``x``'s
    storage is written in place after it."""
    def run(gm):
        g = gm.graph
        order = {n: i for i, n in enumerate(g.nodes)}
        outputs, written = _outputs(gm), _written_anywhere(gm)
        for n in list(g.nodes):
            if n.op != "call_function" or n.target not in _NOOPS or len(n.args) != 2 or n.kwargs:
                continue
            x, c = n.args
            if not isinstance(x, fx.Node) or isinstance(c, (fx.Node, bool)) or c != _NOOPS[n.target] \
                    or n in written or (_aliases(n) & outputs and not _fresh_for_output(x, outputs)):
                continue
            vx, vn = _val(x), _val(n)
            if vx is None or vn is None or (vx.dtype, vx.shape, vx.stride()) != (vn.dtype, vn.shape, vn.stride()):
                continue
            # (not x * 1 or x / 1 on a complex x: by 1 + 0j, NaN in a part where the other is infinite, as
            # torch's remove_no_ops finding has it; the search found this twin wrong once aimed operands
            # were inputs, issue 56)
            if vx.is_complex() and n.target in (aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar):
                continue
            if check_writes:
                storage = _aliases(x)
                if any(order[m] > order[n] and _written(m) & storage for m in g.nodes if _mutates(m)):
                    continue
            if n in outputs:
                outputs.add(x)
            n.replace_all_uses_with(x)
            g.erase_node(n)
        gm.recompile()
        return gm
    return run


def remove_identity_arithmetic(gm):
    return _noop_removal(True)(gm)


def remove_identity_arithmetic_though_written_later(gm):
    """Buggy: replaces ``x + 0`` by ``x`` though ``x`` is written in place afterwards."""
    return _noop_removal(False)(gm)


# --- 4. add(a, b) -> add_(a, b) where a is a fresh intermediate read once --------------------------------

_INPLACE = {aten.add.Tensor: aten.add_.Tensor, aten.sub.Tensor: aten.sub_.Tensor, aten.mul.Tensor: aten.mul_.Tensor,
            aten.div.Tensor: aten.div_.Tensor}


def _reinplace(expand_ok: bool):
    """An out-of-place arithmetic call written into its first operand ``a`` instead, where ``a`` is a
    call's own fresh result (no view, no input, no constant) that nothing else reads, of the result's
    dtype, shape and strides. ``expand_ok``: also where ``a`` is an ``expand`` of such a result (whose
    elements share addresses: the in-place form refuses to write it)."""
    def fresh(a) -> bool:
        return a.op == "call_function" and _pure(a) and len(a.users) == 1

    def run(gm):
        g = gm.graph
        outputs = _outputs(gm)
        for n in list(g.nodes):
            if n.op != "call_function" or n.target not in _INPLACE or not isinstance(n.args[0], fx.Node):
                continue
            a = n.args[0]
            if n.args[1:2] and n.args[1] is a:
                continue
            va, vn = _val(a), _val(n)
            if a in outputs or va is None or vn is None or (va.dtype, va.shape) != (vn.dtype, vn.shape):
                continue
            # an expand's strides (zeros) are never the result's: the buggy twin looks at its shape alone
            expanded = expand_ok and _is(a, aten.expand.default) and len(a.users) == 1 and fresh(a.args[0])
            if not expanded and not (fresh(a) and va.stride() == vn.stride()):
                continue
            with g.inserting_before(n):
                new = g.call_function(_INPLACE[n.target], n.args, n.kwargs)
            new.meta["val"] = vn
            n.replace_all_uses_with(new)
            g.erase_node(n)
        gm.recompile()
        return gm
    return run


def reinplace(gm):
    return _reinplace(False)(gm)


def reinplace_into_expanded(gm):
    """Buggy: writes in place into an expanded view too (several of its elements at one address)."""
    return _reinplace(True)(gm)


# --- 5. view(view.dtype(x, d), s) -> view.dtype(view(x, s), d) --------------------------------------------


def _view_dtype_first(same_size_only: bool):
    def match(g, n):
        if not _is(n, aten.view.default, aten.reshape.default) or not _is(n.args[0], aten.view.dtype):
            return None
        bits = n.args[0]
        x, dtype = bits.args
        if len(bits.users) != 1 or _val(x) is None or (same_size_only and _val(x).dtype.itemsize != dtype.itemsize):
            return None
        moved = g.call_function(n.target, (x, n.args[1]))
        return g.call_function(aten.view.dtype, (moved, dtype))
    return match


def view_before_view_dtype(gm):
    return _rewrite(gm, _view_dtype_first(True))


def view_before_view_dtype_of_any_size(gm):
    """Buggy: moves the view before a ``view.dtype`` to another element size, whose sizes it then
    takes in the wrong unit (the last dim grows or shrinks by the ratio)."""
    return _rewrite(gm, _view_dtype_first(False))


# --- 6. mul(x, sigmoid(x)) -> silu(x) ------------------------------------------------------------------------


def _silu(keep_sigmoid: bool):
    """``mul`` of ``x`` and ``sigmoid(x)`` (either order, the same node ``x``: the diamond) on a float
    ``x`` of the product's shape is ``silu(x)``. ``keep_sigmoid``: the sigmoid's other readers keep it
    (else they get the silu too)."""
    def run(gm):
        g = gm.graph
        for n in list(g.nodes):
            if not _is(n, aten.mul.Tensor) or len(n.args) != 2:
                continue
            for x, s in (n.args, n.args[::-1]):
                if not _is(s, aten.sigmoid.default) or s.args[0] is not x:
                    continue
                vx, vn = _val(x), _val(n)
                if vx is None or vn is None or not vx.is_floating_point() or vx.shape != vn.shape or vx.dtype != vn.dtype:
                    continue
                with g.inserting_before(n):
                    silu = g.call_function(aten.silu.default, (x,))
                if not keep_sigmoid:
                    s.replace_all_uses_with(silu)
                n.replace_all_uses_with(silu)
                g.erase_node(n)
                break
        g.eliminate_dead_code()
        gm.recompile()
        _refresh_meta(gm)
        return gm
    return run


def silu_fusion(gm):
    return _silu(True)(gm)


def silu_fusion_taking_the_sigmoids_readers(gm):
    """Buggy: the sigmoid's other readers get the silu as well."""
    return _silu(False)(gm)


# --- 7. pow(abs(x), 2) -> mul(x, x) ---------------------------------------------------------------------------


def _square_of_abs(real_only: bool):
    """``pow(abs(x), 2)`` is ``x * x`` for a real ``x`` (an integer ``x`` only with the int exponent 2:
    ``int ** 2.0`` is a float); ``real_only``: not for a complex ``x``."""
    def match(g, n):
        if not _is(n, aten.pow.Tensor_Scalar) or not _is(n.args[0], aten.abs.default) or n.args[1] != 2:
            return None
        x = n.args[0].args[0]
        val = _val(x)
        if not isinstance(val, torch.Tensor) or val.dtype is torch.bool or (real_only and val.is_complex()):
            return None
        if type(n.args[1]) is not int and not (val.is_floating_point() or val.is_complex()):
            return None
        return g.call_function(aten.mul.Tensor, (x, x))
    return match


def square_of_abs(gm):
    return _rewrite(gm, _square_of_abs(True))


def square_of_abs_on_complex_too(gm):
    """Buggy: rewrites a complex ``x`` too, whose ``x * x`` is complex (and not ``|x|**2``)."""
    return _rewrite(gm, _square_of_abs(False))


_HERE = "tests.passes.structures:"

STRUCTURES = {
    "cse-scalar-type": Matcher(_HERE + "cse", _HERE + "cse_keyed_on_values", "add(x, 1) and add(x, 1.0) merged",
                               "functorch fx_graph_cse, torch.fx.passes CSEPass (argument keys)"),
    "cse-across-write": Matcher(_HERE + "cse", _HERE + "cse_across_writes", "two reads merged across a write to their operand",
                                "functorch fx_graph_cse on graphs with in-place ops", graphs="mutating"),
    "noop-then-written": Matcher(_HERE + "remove_identity_arithmetic", _HERE + "remove_identity_arithmetic_though_written_later",
                                 "x + 0 replaced by x, which is written afterwards",
                                 "Inductor remove_noop_ops on graphs with in-place ops", graphs="mutating"),
    "reinplace-expanded": Matcher(_HERE + "reinplace", _HERE + "reinplace_into_expanded",
                                  "an expanded intermediate written in place",
                                  "torch.fx.passes.reinplace, Inductor reinplace_inplaceable_ops"),
    "view-dtype-reorder": Matcher(_HERE + "view_before_view_dtype", _HERE + "view_before_view_dtype_of_any_size",
                                  "a view moved past view.dtype to another element size",
                                  "Inductor joint_graph view reordering, view.dtype as a view"),
    "silu-diamond": Matcher(_HERE + "silu_fusion", _HERE + "silu_fusion_taking_the_sigmoids_readers",
                            "the sigmoid's other readers given the silu", "Inductor pattern matcher, mul(x, sigmoid(x))"),
    "abs-square-complex": Matcher(_HERE + "square_of_abs", _HERE + "square_of_abs_on_complex_too",
                                  "|x|**2 taken for x * x on a complex x",
                                  "norm decompositions squaring without abs (complex inputs)"),
}
