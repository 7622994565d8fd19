"""Hypothesis strategies for ATen-level FX graphs, tensors and symbolic index expressions.

>>> from strategies import graphs
>>> from hypothesis import given
>>> @given(graphs(max_nodes=6))
... def test_my_pass(case):
...     case.gm(*case.fresh_inputs())
"""

from . import _determinism  # noqa: F401 - first: draws must not depend on imports (see the module)
from ._build.builder import eager_fake_disagreement, fake_disagreements
from ._build.device import RNG_SEED
from ._build.modes import current_modes, describe_modes, modes_kept, restore_modes
from ._draw.chains import CHAINS
from ._catalog.vocabulary import CATEGORIES, DOMAINS, Kwarg, OpSpec
from ._errors import InvalidArgument
from ._draw.features import FEATURES, graph_features
from ._draw.focus import Focus
from ._draw.hops import HOPS, check_hops
from ._draw.case import GraphCase
from ._graphs import SIZES, graphs
from ._ir.convert import IRS, check_ir, ir_errors, to_ir
from ._build.meta import attach_meta, shared_fake_mode
from ._catalog.ops import OPS, rows_named
from ._catalog.custom import CustomHealth, custom_health, custom_health_since, custom_rows, op_rule
from ._draw.custom_calls import CallDraw
from ._draw.seeds import SeedGraph
from ._dynamic.programs import DYNAMIC_FEATURES
from ._dynamic.symshapes import SymbolicRun, SymbolicShapes, graph_symbolic_shapes, size_symbol, symbolic_value
from ._symbolic import FUNCTIONS as INDEX_FUNCTIONS
from ._symbolic import index_expressions
from ._tensors import broadcastable_shapes, dtypes, scalars, shapes, special_floats, tensors

__all__ = [
    "CATEGORIES",
    "CallDraw",
    "CustomHealth",
    "custom_health",
    "custom_health_since",
    "custom_rows",
    "op_rule",
    "CHAINS",
    "DOMAINS",
    "DYNAMIC_FEATURES",
    "FEATURES",
    "Focus",
    "INDEX_FUNCTIONS",
    "IRS",
    "OPS",
    "SeedGraph",
    "SymbolicRun",
    "SymbolicShapes",
    "GraphCase",
    "InvalidArgument",
    "Kwarg",
    "OpSpec",
    "RNG_SEED",
    "HOPS",
    "check_hops",
    "SIZES",
    "attach_meta",
    "current_modes",
    "describe_modes",
    "modes_kept",
    "restore_modes",
    "broadcastable_shapes",
    "check_ir",
    "dtypes",
    "eager_fake_disagreement",
    "fake_disagreements",
    "graph_features",
    "graph_symbolic_shapes",
    "graphs",
    "index_expressions",
    "ir_errors",
    "scalars",
    "shapes",
    "shared_fake_mode",
    "size_symbol",
    "symbolic_value",
    "rows_named",
    "special_floats",
    "tensors",
    "to_ir",
]
