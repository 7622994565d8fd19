"""The calling forms a pass may take (``load_pass(signature=)``, ``verify --signature``), with no
import of torch: the CLI builds its parser, and prints ``--help``, from this table alone."""

SIGNATURES = {
    "gm": "fn(gm) -> GraphModule | None | PassResult (also PassBase and PassManager instances)",
    "gm-inputs": "fn(gm, sample_inputs) -> GraphModule (Torch-TensorRT's documented lowering pass)",
    "gm-varargs": "fn(gm, *sample_inputs) -> GraphModule (torch.fx.passes.reinplace style)",
    "gm-settings": "fn(gm, settings) -> GraphModule (Torch-TensorRT's current form; needs a settings factory)",
    "graph": "fn(graph: torch.fx.Graph) -> None | Graph (Inductor custom graph pass)",
    "pattern-table": "an Inductor PatternMatcherPass: table.apply(graph) -> number of replacements",
    "gm-signature": "fn(gm, graph_signature) (torch.export passes; the signature of --ir export graphs)",
    "transformer": "an fx.Transformer subclass: Cls(gm).transform() -> GraphModule (NormalizeArgs style)",
}
