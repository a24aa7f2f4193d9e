"""A PEFT model that switches LoRA adapters after compiling, as a script for `ctc-doctor run` (a small
network and adapters saved to a temporary folder: no download). Adapter `default` (rank 4) comes with the
model; `b` (rank 8) is loaded after the compile and activated at step 4, `default` again at step 8: each
switch recompiles, which PEFT's hotswap recipe avoids (`run --compare default,hotswap`). It prints a
checksum of every step's output, to compare the runs' results."""

import copy
import tempfile

import torch
from peft import LoraConfig, get_peft_model


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def lora(rank):
    return LoraConfig(r=rank, lora_alpha=rank, target_modules=["fc1", "fc2"], init_lora_weights=False)


torch.manual_seed(0)
base = Net().eval()
x = torch.randn(16, 32)
folder = tempfile.mkdtemp()
torch.manual_seed(2)
get_peft_model(copy.deepcopy(base), lora(8)).save_pretrained(folder)  # adapter b, as a file holds it
torch.manual_seed(1)
model = get_peft_model(base, lora(4))
compiled = torch.compile(model, backend="eager")
total = 0.0
with torch.no_grad():
    for step in range(14):
        if step == 4:
            model.load_adapter(folder, adapter_name="b", torch_device="cpu")
            model.set_adapter("b")
        elif step == 8:
            model.set_adapter("default")
        total += compiled(x).double().abs().sum().item()
print(f"checksum {total:.6f}")  # every step's output: each adapter in turn
