"""Labelled text-line images for text-orientation classifiers (PP-OCR's ``cls`` model: upright = 0,
rotated 180 degrees = 1), rendered with the font Pillow ships (no download), preprocessed as
RapidOCR feeds ``ch_ppocr_mobile_v2.0_cls``: height 48, width kept in proportion up to 192,
``(x / 255 - 0.5) / 0.5`` per RGB channel, zero padding on the right, NCHW float32.

The lines are random words of letters and digits in dark ink on light paper, with a little
jitter of size, position and grey levels; half are rotated by 180 degrees. A fixed seed gives the
same set on every machine with the same Pillow.
"""

from __future__ import annotations

import math

import numpy as np

HEIGHT, WIDTH = 48, 192  # the cls model's input (RapidOCR's cls_image_shape)
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _render(rng: np.random.Generator) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    words = [''.join(rng.choice(list(_ALPHABET), size=int(rng.integers(2, 8)))) for _ in range(int(rng.integers(1, 4)))]
    text = " ".join(words)
    size = int(rng.integers(22, 34))
    font = ImageFont.load_default(size=size)
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left + 8, bottom - top + 8
    paper, ink = int(rng.integers(200, 256)), int(rng.integers(0, 70))
    img = Image.new("RGB", (w, h), (paper, paper, paper))
    ImageDraw.Draw(img).text((4 - left, 4 - top), text, fill=(ink, ink, ink), font=font)
    return np.asarray(img)


def _preprocess(img: np.ndarray) -> np.ndarray:
    from PIL import Image

    h, w = img.shape[:2]
    resized_w = min(WIDTH, int(math.ceil(HEIGHT * w / h)))
    x = np.asarray(Image.fromarray(img).resize((resized_w, HEIGHT), Image.BILINEAR), np.float32)
    x = (x / 255.0 - 0.5) / 0.5
    out = np.zeros((3, HEIGHT, WIDTH), np.float32)
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
        xs.append(_preprocess(np.ascontiguousarray(img)))
        ys.append(label)
    return np.stack(xs), np.asarray(ys, np.int64)
