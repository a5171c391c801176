"""Labelled text-line images for PP-OCR's models, rendered with the font Pillow ships (no download),
preprocessed as RapidOCR feeds them: height 48, width kept in proportion up to the model's,
``(x / 255 - 0.5) / 0.5`` per RGB channel, zero padding on the right, NCHW float32.

* :func:`load_text_lines`: text-orientation classifiers (``ch_ppocr_mobile_v2.0_cls``: upright = 0,
  rotated 180 degrees = 1): random words of letters and digits in dark ink on light paper, with a
  little jitter of size and grey levels; half are rotated by 180 degrees.
* :func:`recognition_lines`: recognizers (SVTR + CTC): lines with known text — a word of a small
  business vocabulary, a word and a number, or 3-7 random lowercase letters and digits — with
  :func:`ctc_greedy` (PaddleOCR's decoding) and :func:`edit_distance` for the task metric.

A fixed seed gives the same set on every machine with the same Pillow.
"""

from __future__ import annotations

import math

import numpy as np

HEIGHT, WIDTH = 48, 192  # the cls model's input (RapidOCR's cls_image_shape)
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def draw_line(text: str, rng: np.random.Generator, size=(22, 34), paper=(200, 256), ink=(0, 70)) -> np.ndarray:
    """``text`` in Pillow's font: an RGB uint8 image with a 4-pixel margin; the font size, paper and
    ink grey levels drawn from ``rng`` in the half-open ranges given, in that order."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=int(rng.integers(*size)))
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left + 8, bottom - top + 8
    grey_paper, grey_ink = int(rng.integers(*paper)), int(rng.integers(*ink))
    img = Image.new("RGB", (w, h), (grey_paper,) * 3)
    ImageDraw.Draw(img).text((4 - left, 4 - top), text, fill=(grey_ink,) * 3, font=font)
    return np.asarray(img)


def _render(rng: np.random.Generator) -> np.ndarray:
    words = [''.join(rng.choice(list(_ALPHABET), size=int(rng.integers(2, 8)))) for _ in range(int(rng.integers(1, 4)))]
    return draw_line(" ".join(words), rng)


def preprocess(img: np.ndarray, width: int = WIDTH) -> np.ndarray:
    """RapidOCR's preprocessing of an RGB uint8 line: ``[3, 48, width]`` float32 in [-1, 1]."""
    from PIL import Image

    h, w = img.shape[:2]
    resized_w = min(width, int(math.ceil(HEIGHT * w / h)))
    x = np.asarray(Image.fromarray(img).resize((resized_w, HEIGHT), Image.BILINEAR), np.float32)
    x = (x / 255.0 - 0.5) / 0.5
    out = np.zeros((3, HEIGHT, width), np.float32)
    out[:, :, :resized_w] = x.transpose(2, 0, 1)
    return out


def load_text_lines(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: ``n`` preprocessed lines [n, 3, 48, 192] float32 and their labels (0 upright,
    1 rotated by 180 degrees; alternating)."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for i in range(n):
        img = _render(rng)
        label = i % 2
        if label:
            img = img[::-1, ::-1]
        xs.append(preprocess(np.ascontiguousarray(img)))
        ys.append(label)
    return np.stack(xs), np.asarray(ys, np.int64)


WORDS = ("the quick brown fox jumps over a lazy dog invoice total amount date name address phone number 2024 "
         "price qty order ship to from paid due balance").split()
_LOWER_ALNUM = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))


def random_text(rng: np.random.Generator) -> str:
    """A word of :data:`WORDS`, a word and a number, or 3-7 random lowercase letters and digits (40/20/40%)."""
    u = rng.random()
    if u < 0.4:
        return str(rng.choice(WORDS))
    if u < 0.6:
        return f"{rng.choice(WORDS)} {int(rng.integers(0, 100))}"
    return "".join(rng.choice(_LOWER_ALNUM, size=int(rng.integers(3, 8))))


def recognition_lines(count: int, seed: int, width: int) -> tuple[np.ndarray, list[str]]:
    """``(x, texts)``: ``count`` lines of :func:`random_text` drawn at 24-39 px, paper 170-255, ink
    0-89, preprocessed to ``[count, 3, 48, width]``, and their texts (deterministic in ``seed``)."""
    rng = np.random.default_rng(seed)
    texts = [random_text(rng) for _ in range(count)]
    x = np.stack([preprocess(draw_line(t, rng, size=(24, 40), paper=(170, 256), ink=(0, 90)), width) for t in texts])
    return x, texts


def ctc_greedy(probs: np.ndarray, alphabet: list[str]) -> str:
    """PaddleOCR's CTC greedy decoding of ``[1, T, C]`` scores: argmax per step, repeats merged,
    index 0 (blank) dropped; ``alphabet[i]`` is class ``i``."""
    best = probs[0].argmax(-1)
    keep = (best != 0) & np.concatenate([[True], best[1:] != best[:-1]])
    return "".join(alphabet[i] for i in best[keep])


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (an insertion, deletion or substitution of one character costs 1)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]
