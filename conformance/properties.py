"""How each property is judged on one example, from what the checker's runs gave (``checker.py``
runs the original, the pass and the graph it returned; this module compares them).

``Judgements`` is the base of the checker's ``_Run`` and holds its comparisons: ``validity``'s
``meta['val']`` check (an interpreter run of the result, less the stale entries the original had
already), ``values`` (output metadata, autograd state, then the oracle), ``mutations`` (inputs,
tensor constants, grad mode and autocast after the run), ``aliasing`` (``alias_map``: what each output shares
storage with, and whether an input object itself is returned), and the ``preserve=`` contracts
(a violation counts only where the original had none like it). ``idempotence`` and ``determinism``
apply the pass again, so they stay with the runs in ``checker.py``.
"""

from __future__ import annotations

import collections
import re

import torch

from strategies import describe_modes

from ._result import Violation
from ._warning_log import quietly
from .contracts import storage_of
from .copies import attr_or_none, clone_inputs, graph_run, tensor_constants
from .deadlines import timed
from .invariants import Recorder, fake_rederives, first_line as _first_line, meta_val_errors, node_label
from .oracle import bitwise_equal, compare_metadata


class Judgements:
    """The property judgements of one example: a base of ``checker._Run``, whose attributes they read
    (``c`` the Checker, ``gm``/``inputs`` the example, ``oracle``, ``expected`` and ``exp_constants``
    the original's run) and whose ``verdict`` they add violations to."""

    def violation(self, prop: str, message: str, kind: str = "") -> None:
        self.verdict.violations.append(Violation(prop, message, kind=kind))

    def _preserved(self, ctx, original) -> None:
        """``preserve=`` contracts: a violation counts only where the original had no such one (same
        message, node names aside); a graph the pass did not change is never judged."""
        for contract in self.c.preserved:
            already = collections.Counter(_unnamed(m) for m in contract.check(original))
            for message in contract.check(ctx):
                if already[_unnamed(message)] > 0:
                    already[_unnamed(message)] -= 1
                    continue
                self.violation(f"contracts:{contract.name}", f"{message} (the original kept it)")

    def _meta(self, after):
        rec = Recorder(after)
        try:
            with graph_run(after), timed(self.c.timeout):
                quietly("result", rec.run, *clone_inputs(self.inputs))
        except Exception as exc:  # noqa: BLE001 - forward ran, the interpreter did not
            self.violation("validity", f"fx.Interpreter run raised {type(exc).__name__}: {_first_line(exc)}, "
                                       f"but should agree with forward(){_node(after, rec.failed)}")
            return
        # where the pass's meta['val'] is what fake propagation derives and eager differs, torch disagrees with itself
        errors = meta_val_errors(after, rec.seen, excuse=fake_rederives)
        if errors:  # only what the pass made wrong: a stale meta['val'] it kept from its input is not its fault
            inherited = self._original_meta_errors()
            errors = [m for m in errors if _meta_key(m) not in inherited]
        for message in errors[:3]:
            self.violation("validity", message)

    def _original_meta_errors(self) -> set:
        """The original's own wrong ``meta['val']`` entries (a tracer's fake tensors can disagree with
        eager about a degenerate layout's strides), keyed by node name and message."""
        rec = Recorder(self.gm)
        try:
            with graph_run(self.gm):
                quietly("original", rec.run, *clone_inputs(self.inputs))
        except Exception:  # noqa: BLE001 - the original's interpreter run failing is not the pass's
            return set()
        return {_meta_key(m) for m in meta_val_errors(self.gm, rec.seen)}

    def _values(self, exp_flat, exp_spec, act_flat, act_spec, exp_in, act_in):
        if len(act_flat) != len(exp_flat):
            self.violation("values", f"outputs={len(act_flat)}, but should be {len(exp_flat)} (as the original returns)")
            return
        if act_spec != exp_spec:
            self.violation("values", f"output structure={act_spec}, but should be {exp_spec}")
            return
        inputs = {storage_of(t) for t in exp_in} - {None}
        act_inputs = {storage_of(t) for t in act_in} - {None}
        for i, (a, e) in enumerate(zip(act_flat, exp_flat)):
            what = f"output[{i}]"
            # An output that is a view of an input has that view's layout; where a contract makes it
            # stop aliasing (a copy, e.g. no-input-as-output), the copy's layout is its own.
            copied = self.c.alias_removal_ok and storage_of(a) not in act_inputs
            message = compare_metadata(a, e, what, strides=storage_of(e) in inputs and not copied)
            if message is None and isinstance(e, torch.Tensor):
                message = _grad_state(a, e, what)
            if message is None:
                message = self.oracle.output(i, a, e, what)
            if message:
                self.violation("values", message)

    def _mutations(self, act_in, act_modes):
        _, exp_in, exp_modes = self.expected
        for i, (a, e) in enumerate(zip(act_in, exp_in)):
            message = self._state_mismatch(a, e, self.inputs[i], f"input[{i}] after the run", "mutates",
                                           lambda ref: ref[1][i])
            if message:
                self.violation("mutations", message)
        message = describe_modes(act_modes, exp_modes)
        if message:
            self.violation("mutations", message)

    def _constant_writes(self, act_constants):
        """A graph may write its own constants (module buffers): that state is the caller's too."""
        for name, e in self.exp_constants.items():
            a, what, before = act_constants[name], f"constant {name} after the run", attr_or_none(self.gm, name)
            if a is None:
                if _changed(e, before):
                    self.violation("mutations", f"{what}=missing, but should hold what the original writes to it "
                                                f"(the pass removed the constant)")
                continue
            message = self._state_mismatch(a, e, before, what, "writes", lambda ref: ref[2].get(name))
            if message:
                self.violation("mutations", message)

    def _state_mismatch(self, a, e, before, what: str, verb: str, pick) -> str | None:
        """None when ``a`` (the result's state after its run) matches ``e`` (the original's after its
        run), else the message, saying whether the original changed that state (``before``: never run).
        ``pick(reference)`` is the fp64 value of that state, for the oracle."""
        message = compare_metadata(a, e, what, strides=True)
        if message is None and isinstance(e, torch.Tensor) and not bitwise_equal(a, e):
            message = self.oracle.compare(a, e, what, pick)
        if message is None:
            return None
        hint = f"the original {verb} it" if _changed(e, before) else "the original leaves it unchanged"
        return f"{message}\n  ({hint})"

    def _aliasing(self, exp_flat, exp_in, act_flat, act_in, after):
        want = alias_map(exp_flat, exp_in, self.exp_constants)  # the constants the original ran with (a snapshot)
        got = alias_map(act_flat, act_in, tensor_constants(after))
        for i, (g, w) in enumerate(zip(got, want)):
            # Coming to share storage with an input, a constant or another output is a violation
            # unless the original's output shared it too: a caller that writes into one output (or
            # resizes it, or hands it to an in-place op) sees the other change. CSE of duplicate
            # results did that, and PyTorch fixed it as a bug (issue 56): an output may be merged
            # with another only where the original already returned one storage twice.
            added = sorted(g - w)
            removed = sorted(w - g)
            if added:
                self.violation("aliasing", f"output[{i}] aliases {', '.join(added)}, but should not "
                                           f"(the original's output[{i}] aliases {_aliases(w)})")
            elif removed and not self.c.alias_removal_ok:
                hint = (REPAIR_HINT if any(t.startswith("input[") for t in removed) else "")
                self.violation("aliasing", f"output[{i}] aliases {_aliases(g)}, but should alias "
                                           f"{', '.join(removed)} too (as the original's does){hint}")
            else:
                self._identity(i, exp_flat[i], exp_in, act_flat[i], act_in)

    def _identity(self, i, e, exp_in, a, act_in):
        """Where the original returns an input object itself, the result must too, not a view or an
        alias of it: a caller may test ``out is x``, or change ``out``'s metadata and expect ``x``'s
        to change with it (a contract that allows alias removal allows a copy)."""
        was = next((j for j, t in enumerate(exp_in) if t is e), None)
        if was is None or self.c.alias_removal_ok or act_in[was] is a:
            return
        # an empty tensor has no storage to share (alias_map leaves it out): only the object tells
        where = "(empty)" if isinstance(a, torch.Tensor) and not a.untyped_storage().nbytes() \
            else f"on input[{was}]'s storage,"
        self.violation("aliasing", f"output[{i}] is a new tensor object {where} but should be "
                                   f"input[{was}] itself (the original returns the input object)")


# An output that no longer aliases an input is what a repair pass (Torch-TensorRT's
# repair_input_as_output, a view-to-copy pass) is for: its contract says so, and allows it.
REPAIR_HINT = ("; where ending that aliasing is the pass's purpose (a repair pass), state its contract: "
               "--ensure no-input-as-output (or no-views)")


def _grad_state(a, e, what: str) -> str | None:
    """The autograd state a caller sees: ``requires_grad``, and whether the output has a ``grad_fn``
    (is part of a graph backward runs through) or is a leaf."""
    if not isinstance(a, torch.Tensor):
        return None
    if a.requires_grad != e.requires_grad:
        return f"{what} requires_grad={a.requires_grad}, but should be {e.requires_grad} (as the original's output)"
    if (a.grad_fn is None) != (e.grad_fn is None):
        got = "None" if a.grad_fn is None else type(a.grad_fn).__name__
        want = "None (a leaf)" if e.grad_fn is None else f"a backward node ({type(e.grad_fn).__name__})"
        return f"{what} grad_fn={got}, but should be {want}, as the original's output"
    return None



def alias_map(outputs, inputs, constants: dict) -> list:
    """Per output, the set of what it shares storage with: 'input[i]', 'a constant', 'output[j]'.
    An empty output shares nothing: no element of it can be written or read through another."""
    by_storage = {}
    for i, t in enumerate(inputs):
        by_storage.setdefault(storage_of(t), set()).add(f"input[{i}]")
    for t in constants.values():
        by_storage.setdefault(storage_of(t), set()).add("a constant")
    out_keys = [None if isinstance(t, torch.Tensor) and t.numel() == 0 else storage_of(t) for t in outputs]
    result = []
    for i, key in enumerate(out_keys):
        tags = set() if key is None else set(by_storage.get(key, ()))
        tags |= {f"output[{j}]" for j, k in enumerate(out_keys) if j != i and k is not None and k == key}
        result.append(frozenset(tags))
    return result



def _aliases(tags) -> str:
    return ", ".join(sorted(tags)) if tags else "nothing"



def _changed(after, before) -> bool:
    """Whether a run changed a tensor's values or metadata (``before``: the untouched original)."""
    return not (isinstance(after, torch.Tensor) and bitwise_equal(after, before)
                and compare_metadata(after, before, "", strides=True) is None)



def _node(gm, node) -> str:
    return f" [{node_label(gm, node)}]" if node is not None else ""



def _meta_key(message: str) -> tuple:
    """A meta_val_errors message as (node name, message without its label)."""
    name = re.search(r"\[node \d+ %(\w+):", message)
    return (name.group(1) if name else None, _unnamed(message))



def _unnamed(message: str) -> str:
    """A contract message without node names and labels, to match a violation across the pass."""
    return re.sub(r"%\w+", "%_", re.sub(r"\s*\[node \d+ .*$", "", message, flags=re.S))  # labels end messages



__all__ = ["REPAIR_HINT", "Judgements", "alias_map"]
