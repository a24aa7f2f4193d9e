"""Models whose compiled result is wrong in one place, for the accuracy bisection (copied into a test's own
folder when the test edits them: the repro scripts rebuild the model from this file)."""

import torch

FACTOR = 1.05
"""How much more the wrong block computes while compiled (1.0: the block is right)."""


class Block(torch.nn.Module):
    def __init__(self, wrong: bool = False):
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.fc = torch.nn.Linear(32, 32)
        self.wrong = wrong

    def forward(self, x):
        h = self.fc(self.norm(x))
        if self.wrong and torch.compiler.is_compiling():
            h = h * FACTOR  # the bug: only the compiled code computes this
        return x + torch.tanh(h)


class SixBlocks(torch.nn.Module):
    """Six blocks of one class; block 3 alone is wrong under compile."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(16, 32)
        self.blocks = torch.nn.ModuleList(Block(wrong=i == 3) for i in range(6))
        self.head = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def six_blocks():
    torch.manual_seed(0)
    return SixBlocks(), (torch.randn(4, 16),)


def six_blocks_counted():
    """six_blocks, each build appended to the file $CTC_TEST_BUILDS names (the building process's pid)."""
    import os

    with open(os.environ["CTC_TEST_BUILDS"], "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    return six_blocks()


class RightBlocks(SixBlocks):
    def __init__(self):
        super().__init__()
        for block in self.blocks:
            block.wrong = False


def right_blocks():
    torch.manual_seed(0)
    return RightBlocks(), (torch.randn(4, 16),)


def sloppy_tanh(gm, example_inputs):
    """A backend that miscompiles one operation: every `tanh` comes out 5 % too large (as an inductor
    lowering bug would), the rest of the graph right."""
    import operator

    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch.tanh:
            with gm.graph.inserting_after(node):
                scaled = gm.graph.call_function(operator.mul, (node, 1.05))
            node.replace_all_uses_with(scaled)
            scaled.args = (node, 1.05)
    gm.recompile()
    return gm


if "sloppy_tanh" not in torch._dynamo.list_backends(exclude_tags=()):  # this file may be imported twice (a test's copy)
    torch._dynamo.register_backend(name="sloppy_tanh")(sloppy_tanh)
