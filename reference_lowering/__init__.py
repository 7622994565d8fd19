"""Reference implementations checked by the conformance suite (pass infrastructure, functionalization,
pointwise-to-Triton lowering, symbolic rewrites). Never imports ``conformance`` or ``strategies``.
"""

from ._errors import LoweringError

__all__ = ["LoweringError"]
