#!/usr/bin/python3
"""Writes a decoder that hetbench can serve in place of its built-in one (a brought decoder).

    python3 scripts/decoder_torchscript.py OUT.pt [--layers 2] [--heads 4] [--head-width 16]
        [--context 256] [--vocabulary 1000] [--seed 1]

The module is GPT-2's block (pre-norm causal self-attention, a 4x GELU MLP, learned positions,
the output head tied to the token embedding), weights drawn from the seed as GPT-2 initialises
them (N(0, 0.02), biases 0, norms 1), scripted with
python3-torch (the LibTorch the agent links). Serve it with

    serving: {scenario: offline, decoder: {torchscript: OUT.pt, context: 256, vocabulary: 1000}}

It is also the contract, written as code: the agent reads the int attributes layers, heads,
head_width, context and vocabulary; it owns the key/value cache (float32, [slots, heads, context,
head_width] per layer) and calls forward(tokens [n, t], positions [n, t], slots [n], keys, values)
for a prefill (n = 1, t = the prompt) or a decoding step (t = 1, n requests at their own positions);
forward writes row i's keys and values into cache row slots[i] at positions[i] and returns the
logits of each row's last position, [n, vocabulary]. The agent picks the next token (greedy).
"""

import argparse
from typing import List

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, heads: int, head_width: int):
        super().__init__()
        width = heads * head_width
        self.heads = heads
        self.head_width = head_width
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x, positions, slots, k_cache, v_cache):
        n, t, width = x.shape
        qkv = self.qkv(self.ln1(x)).view(n, t, 3, self.heads, self.head_width)
        q = qkv[:, :, 0].transpose(1, 2)  # [n, heads, t, head_width]
        rows = slots.unsqueeze(1).expand(n, t)
        k_cache[rows, :, positions] = qkv[:, :, 1]  # [n, t, heads, head_width] into the rows' positions
        v_cache[rows, :, positions] = qkv[:, :, 2]
        seen = int(positions.max()) + 1
        k = k_cache[slots, :, :seen]  # [n, heads, seen, head_width]: each row its own history
        v = v_cache[slots, :, :seen]
        scores = torch.matmul(q, k.transpose(-2, -1)) / (self.head_width ** 0.5)
        hidden = torch.arange(seen, device=x.device).view(1, 1, 1, seen) > positions.view(n, 1, t, 1)
        scores = scores.masked_fill(hidden, float("-inf"))
        a = torch.matmul(torch.softmax(scores, -1), v).transpose(1, 2).reshape(n, t, width)
        x = x + self.out(a)
        return x + self.proj(nn.functional.gelu(self.fc(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self, layers: int, heads: int, head_width: int, context: int, vocabulary: int):
        super().__init__()
        self.layers = layers
        self.heads = heads
        self.head_width = head_width
        self.context = context
        self.vocabulary = vocabulary
        width = heads * head_width
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(heads, head_width) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens, positions, slots, keys: List[torch.Tensor], values: List[torch.Tensor]):
        x = self.tokens(tokens) + self.positions(positions)
        for i, block in enumerate(self.blocks):
            x = block(x, positions, slots, keys[i], values[i])
        return torch.matmul(self.ln_f(x[:, -1]), self.tokens.weight.t())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-width", type=int, default=16)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--vocabulary", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    m = Decoder(a.layers, a.heads, a.head_width, a.context, a.vocabulary).eval()
    torch.jit.script(m).save(a.out)
    print(f"{a.out}: {a.layers} layers, {a.heads} heads x {a.head_width}, context {a.context}, "
          f"vocabulary {a.vocabulary}, {sum(p.numel() for p in m.parameters())} parameters")


if __name__ == "__main__":
    main()
