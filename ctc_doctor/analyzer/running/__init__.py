"""Running the user's code: what every phase and the capture need to call the model the same way.

- calls: one call of the workload (the same code for analysis, `fix` and the benchmark), the loss,
  the model state a run puts back; settings: how calls run and how a phase reports progress (torch-free)
- tensors: the one tensor walker (namedtuples and ModelOutput kept), detached outputs, input clones
- copying: model copies and fresh input copies (deepcopy tried in one place)
- modules: module paths, forward argument names, input descriptions, forward pre-hooks, the
  reference's ways block by block (cast while it runs; checkpointed; saved on the host)
- numerics: outputs against a reference; device: synchronise, peak memory
- deadline: wall-clock limits; warning_notes: Python warnings a run raises, counted into notes
"""
