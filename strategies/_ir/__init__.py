"""Graphs in the IRs real pipelines hand to their passes, and the torch-level IR.

``convert.py`` re-expresses a drawn ATen graph as a pipeline stage hands it to its passes
(post-grad, export, core ATen, pre-dispatch, ``ExportedProgram.module()``, a Dynamo backend's
graph), traced by that stage's own tracer, and states each IR's invariants (``ir_errors``);
``torch_ir.py`` draws torch-level graphs, ``fx.symbolic_trace`` of a drawn ``nn.Module`` whose
layers are the rows of ``torch_layers.py``. Both build on drawn graphs (``_draw``), so what they
produce shrinks with them.
"""
