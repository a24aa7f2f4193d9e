"""A copy of the user's model with fix actions applied, and what the rules know about the model.

- facts: the torch-free types the suggestion rules read (also offline); model_facts gathers them
- rewrite: mechanical source rewrites of one method (torch-free: the rules plan them offline too)
- variants: a copy of the model and its inputs with fix actions applied (what `fix` verifies and the
  benchmark's fixed arms measure)
"""
