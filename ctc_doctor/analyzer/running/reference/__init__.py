"""The higher-precision reference every numerics judgement compares against, and the ways it fits beside
the model: `precision` (the ways, the room, the run), `slicing` (the batch's rows a few at a time),
`streamed` (training's parameters one module at a time)."""
