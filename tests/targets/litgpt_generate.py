"""litgpt's `generate` on a small Pythia-shaped GPT (random weights, nothing downloaded): the model compiled, a
static KV cache, two prompts of other lengths (8 and 11 tokens), 6 new tokens each, greedy. Under
`ctc-doctor run` (tests/test_libraries.py): the first one-token step compiles once for the length 1 (expected),
and the second prompt's new length once more, then automatic dynamic shapes serve the rest."""

import torch
from litgpt.config import Config
from litgpt.generate.base import generate
from litgpt.model import GPT

torch.manual_seed(0)
config = Config.from_name("pythia-14m")
model = GPT(config).eval()
model.max_seq_length = 32
model.set_kv_cache(batch_size=1)
model = torch.compile(model)
for length in (8, 11):
    with torch.inference_mode():
        prompt = torch.randint(0, config.vocab_size, (length,))
        out = generate(model, prompt, max_returned_tokens=length + 6, temperature=0.0)
    print(tuple(out.shape))
