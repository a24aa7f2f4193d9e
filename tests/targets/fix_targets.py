"""Builders for the fix tests, loaded in-process as file targets (no backend registration here)."""

import copy
import logging

import torch

from ctc_doctor import Workload


class ShapeChangingBranch(torch.nn.Module):
    """A branch whose two sides have different shapes: the `torch.where` rewrite is wrong here."""

    def forward(self, x):
        if x.sum() > 0:
            return x.sum(dim=0)
        return x


def unsafe_branch():
    return ShapeChangingBranch(), (torch.rand(4, 8),)


def gpt2_with_labels():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 128, (2, 8))
    return Workload(model, kwargs={"input_ids": ids, "labels": ids}, name="gpt2_with_labels")


class LengthSpecialized(torch.nn.Module):
    """`x.shape[1] == 8` specializes the length: marking it dynamic fails, and torch logs the guard it
    could not build (ConstraintViolationError) as ERROR records on stderr."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        if x.shape[1] == 8:
            x = x * 2
        return self.lin(x)


def length_specialized():
    return LengthSpecialized(), (torch.randn(2, 8, 16),), [(torch.randn(2, 12, 16),)]


def gpt2_train_labels():
    """A 1-layer GPT-2 trained with labels (dropout 0) on three sequence lengths: the `loss_function`
    logger break, and one changing length shared by `input_ids`, `labels` and `attention_mask`."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=1, n_head=2, n_embd=32, vocab_size=128, n_positions=64, bos_token_id=0, eos_token_id=0,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    model = GPT2LMHeadModel(config).train()

    def batch(length):
        ids = torch.randint(0, 128, (2, length))
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones(2, length, dtype=torch.long)}

    return Workload(model, kwargs=batch(8), variants=[batch(12), batch(16)], name="gpt2_train_labels")


class WrongUnderCompile(torch.nn.Module):
    """Computes 5 % more only while compiled: a real wrong result every numerics check must catch."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.proj = torch.nn.Linear(64, 64).to(dtype)

    def forward(self, x):
        y = self.proj(x)
        if torch.compiler.is_compiling():
            y = y * 1.05
        print("step")  # a break for `fix` to work on
        return torch.tanh(y)


def wrong_under_compile():
    return WrongUnderCompile(), (torch.randn(8, 64),)


def wrong_under_compile_bf16():
    return WrongUnderCompile(torch.bfloat16), (torch.randn(8, 64, dtype=torch.bfloat16),)


def gpt2_bf16_wide_init():
    """A 1-layer GPT-2 in bfloat16 with a wide initialisation (std 0.2): inductor's compiled logits differ
    from eager's by more than any bf16 elementwise tolerance, yet are as close to float64 as eager's."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=1, n_head=2, n_embd=32, vocab_size=256, n_positions=64, initializer_range=0.2, bos_token_id=0, eos_token_id=0
    )
    model = GPT2LMHeadModel(config).eval().to(torch.bfloat16)
    return Workload(model, kwargs={"input_ids": torch.randint(0, 256, (2, 32))}, name="gpt2_bf16_wide_init")


def mlp_train_adamw():
    """A small MLP trained with AdamW, one batch per call: with `--train` every call is a whole step."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    batches = [torch.randn(8, 32) for _ in range(3)]
    return Workload(
        model,
        args=(batches[0],),
        variants=[(b,) for b in batches[1:]],
        loss_fn=lambda y: y.pow(2).mean(),
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-2),
        name="mlp_train_adamw",
    )


def bad_optimizer():
    """An optimizer factory that raises (a negative learning rate)."""
    return Workload(torch.nn.Linear(4, 4), args=(torch.randn(2, 4),), optimizer=lambda params: torch.optim.AdamW(params, lr=-1.0))


_LOG = logging.getLogger("fix_targets")


class _Noisy(torch.nn.Module):
    """Dropout and noise drawn in forward, and a logger call that breaks the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.drop = torch.nn.Dropout(0.1)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = self.drop(torch.relu(self.fc(x)))
        h = h + 0.01 * torch.rand_like(h)
        _LOG.warning("noisy step")
        return self.out(h)


def noisy_train():
    """A model that draws random numbers (dropout, rand_like) in training mode, with a logger break."""
    return Workload(_Noisy(), args=(torch.randn(8, 16),), variants=[(torch.randn(8, 16),)], name="noisy_train")


class ModuloStep(torch.nn.Module):
    """A step counter on the module, read under `%`: `allow_unspec_int_on_nn_module` holds under Dynamo
    but, on torch 2.13, crashes AOTAutograd (a symbolic int under `%` in its scalar tensorify pass)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.step = 0

    def forward(self, x):
        self.step += 1
        return self.fc(x) * (1.0 / (1 + self.step % 1000))  # BREAK:modulo


def modulo_step():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return Workload(ModuloStep(), (x,), variants=[(x,)] * 11)


class _Body(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        shadow = copy.deepcopy(self.layers[0])  # BREAK:body_deepcopy
        return x + shadow(x)


class WholeBody(torch.nn.Module):
    """Every layer under one child module (as a YOLO model's `model` Sequential): the break is in it."""

    def __init__(self):
        super().__init__()
        self.body = _Body()

    def forward(self, x):
        return self.body(x)


def whole_body():
    torch.manual_seed(0)
    return Workload(WholeBody(), (torch.randn(4, 8),))


class LazyScales(torch.nn.Module):
    """Sets `self.scales` on its first call, as torchvision's RoIAlign pooler sets its scales lazily."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.scales = None

    def forward(self, x):
        if self.scales is None:
            self.scales = [x.shape[-1] / 8.0]
        return self.fc(x) * self.scales[0]


def lazy_scales():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return Workload(LazyScales(), (x,), variants=[(x,)] * 3)


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def _prune_before_call_2(model, index):
    import torch.nn.utils.prune  # not imported by `import torch`

    if index == 2:
        torch.nn.utils.prune.l1_unstructured(model.fc, "weight", amount=0.5)


def pruned_after_compile():
    """Pruned between calls 1 and 2, after the first compile: `fc.weight` stops being a parameter."""
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return Workload(TwoLayers(), (x,), variants=[(x,)] * 3, before_call=_prune_before_call_2)


def _swap_before_call_2(model, index):
    if index == 2 and isinstance(model.fc, torch.nn.Linear):
        model.fc = torch.nn.Sequential(model.fc)  # the same weights in another class: the type guard fails once


def swapped_after_compile():
    """`fc` wrapped in a Sequential between calls 1 and 2, after the first compile, and kept so."""
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return Workload(TwoLayers(), (x,), variants=[(x,)] * 3, before_call=_swap_before_call_2)


def modulo_step_unspec():
    """The step counter under `%` with the user's own `allow_unspec_int_on_nn_module = True` (set here, as
    a script would before compiling): every compile through AOTAutograd crashes on torch 2.13. Run in a
    process of its own (the option is global)."""
    torch._dynamo.config.allow_unspec_int_on_nn_module = True
    return modulo_step()


class _ConvBlock(torch.nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.conv = torch.nn.Conv2d(c1, c2, 3, padding=1)
        self.act = torch.nn.SiLU()

    def forward(self, x):
        return self.act(self.conv(x))


class LayerLoop(torch.nn.Module):
    """A YOLO-like layer loop over blocks of growing width, with a print in the loop: the loop breaks, and
    each block is called from eager code, a frame of its own, compiled once per width."""

    def __init__(self):
        super().__init__()
        widths = [3, 8, 16, 16, 32, 32, 64, 64, 96, 96, 128, 128]
        self.model = torch.nn.Sequential(*[_ConvBlock(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True)])

    def forward(self, x):
        for m in self.model:
            x = m(x)
            print("layer", x.shape[1])  # BREAK:layer_loop
        return x


def layer_loop():
    torch.manual_seed(0)
    return Workload(LayerLoop(), (torch.randn(1, 3, 16, 16),), variants=[(torch.randn(1, 3, 16, 16),)])


class PackedTagger(torch.nn.Module):
    """A sequence tagger over a packed, padded batch: the packing call and the LSTM break the graph."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.lstm = torch.nn.LSTM(16, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, ids, lengths):
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return self.head(out)


def packed_lstm():
    return Workload(PackedTagger().eval(), args=(torch.randint(0, 50, (4, 12)), torch.tensor([12, 9, 7, 3])), name="packed_lstm")


class StepAndSize(torch.nn.Module):
    """An integer step counter read in forward (a recompile per step up to the recompile limit) and a batch
    size that changes half-way: marking the batch dim dynamic alone changes nothing (the counter's
    recompiles reach the limit either way); on top of the counter's fix it removes the last recompile."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.step = 0

    def forward(self, x):
        return torch.relu(self.fc(x)) * (1.0 + self.step * 0.01)


def _count_step(model, index):
    model.step = index


def step_and_size():
    torch.manual_seed(0)
    calls = [(torch.randn(4 if i < 6 else i - 1, 8),) for i in range(12)]
    return Workload(StepAndSize(), calls[0], variants=calls[1:], before_call=_count_step, name="step_and_size")
