"""Reference implementations checked by the conformance suite (pass infrastructure, functionalization,
pointwise-to-Triton lowering, symbolic rewrites). Never imports ``conformance`` or ``strategies``.
"""

from ._errors import LoweringError
from .pointwise import lower_pointwise

__all__ = ["LoweringError", "lower_pointwise"]
