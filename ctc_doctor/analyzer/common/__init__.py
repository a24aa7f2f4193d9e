"""The shared floor of the analyzer: what every phase and the capture may import; it imports none of them.

- calls: one call of the workload (the same code for analysis, `fix` and the benchmark), the loss,
  the model state a run puts back; settings: how calls run (torch-free)
- tensors: the one tensor walker (namedtuples and ModelOutput kept), detached outputs, input clones
- copying: model copies and fresh input copies (deepcopy tried in one place)
- modules: module paths, forward argument names, input descriptions, forward pre-hooks
- facts: what the rules know about the model; variants: a copy with fix actions applied
- numerics: outputs against a reference; device: synchronise, peak memory
- rewrite: mechanical source rewrites; sources, text: where a file lives, one-line errors (torch-free)
- deadline: wall-clock limits
- torch_internals: the one module that touches torch's private APIs
"""
