"""A user's own ops in drawn graphs: ``op_rule`` (how a call of one is drawn) and ``custom_health``
(how often each one's drawn calls ran). Both live in the strategies (``strategies/_catalog/custom.py``),
which never import the harness; they are here so a user's test imports one package.
"""

from strategies import CallDraw, CustomHealth, custom_health, op_rule

__all__ = ["CallDraw", "CustomHealth", "custom_health", "op_rule"]
