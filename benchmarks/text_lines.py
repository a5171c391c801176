"""Rendered text lines with known text: labelled data for the OCR models of the corpus.

No OCR dataset ships with the repo, so the benchmarks draw their own: Pillow's built-in scalable
font at a random size (24-39 px), random ink (0-89) and paper (170-255) grey levels, one line of
text per image, preprocessed as PaddleOCR does for its recognizers and classifier (height 48,
width ``ceil(48 * w / h)`` capped at the model's width, ``(x / 255 - 0.5) / 0.5``, zero-padded on
the right). Texts: a word of a small business vocabulary, optionally followed by a number, or a
random string of lowercase letters and digits (no vocabulary to lean on).
"""

from __future__ import annotations

import numpy as np

WORDS = ("the quick brown fox jumps over a lazy dog invoice total amount date name address phone number 2024 "
         "price qty order ship to from paid due balance").split()
_ALNUM = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))


def random_text(rng: np.random.Generator) -> str:
    """A word, a word and a number, or 3-7 random lowercase letters and digits (40/20/40%)."""
    u = rng.random()
    if u < 0.4:
        return str(rng.choice(WORDS))
    if u < 0.6:
        return f"{rng.choice(WORDS)} {int(rng.integers(0, 100))}"
    return "".join(rng.choice(_ALNUM, size=int(rng.integers(3, 8))))


def render_line(text: str, rng: np.random.Generator, width: int, rotate: bool = False) -> np.ndarray:
    """``text`` drawn and preprocessed: float32 ``[1, 3, 48, width]`` in [-1, 1], rotated 180
    degrees first when ``rotate``."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=int(rng.integers(24, 40)))
    left, top, right, bottom = font.getbbox(text)
    paper, ink = int(rng.integers(170, 256)), int(rng.integers(0, 90))
    img = Image.new("RGB", (right - left + 8, bottom - top + 8), (paper,) * 3)
    ImageDraw.Draw(img).text((4 - left, 4 - top), text, fill=(ink,) * 3, font=font)
    if rotate:
        img = img.rotate(180)
    w, h = img.size
    fit = min(width, int(np.ceil(48 * w / h)))
    a = np.asarray(img.resize((fit, 48), Image.BILINEAR), np.float32).transpose(2, 0, 1) / 255
    x = np.zeros((1, 3, 48, width), np.float32)
    x[0, :, :, :fit] = (a - 0.5) / 0.5
    return x


def text_lines(count: int, seed: int, width: int) -> tuple[list[np.ndarray], list[str]]:
    """``count`` rendered lines of :func:`random_text` and their texts (deterministic in ``seed``)."""
    rng = np.random.default_rng(seed)
    texts = [random_text(rng) for _ in range(count)]
    return [render_line(t, rng, width) for t in texts], texts


def ctc_greedy(probs: np.ndarray, alphabet: list[str]) -> str:
    """PaddleOCR's CTC greedy decoding of ``[1, T, C]`` scores: argmax per step, repeats merged,
    index 0 (blank) dropped; ``alphabet[i]`` is class ``i``."""
    best = probs[0].argmax(-1)
    keep = (best != 0) & np.concatenate([[True], best[1:] != best[:-1]])
    return "".join(alphabet[i] for i in best[keep])


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions of one character each cost 1)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]
