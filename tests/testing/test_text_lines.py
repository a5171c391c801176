"""Rendered text lines (intq.testing.text_lines): recognizer lines are deterministic and their
metric helpers decode and count as PaddleOCR's CTC and Levenshtein do."""

import numpy as np

from intq.testing.text_lines import ctc_greedy, edit_distance, recognition_lines


def test_recognition_lines_are_deterministic_preprocessed_lines_with_their_texts():
    x, texts = recognition_lines(6, seed=3, width=160)
    again, same = recognition_lines(6, seed=3, width=160)
    assert x.shape == (6, 3, 48, 160) and x.dtype == np.float32 and len(texts) == 6
    assert np.array_equal(x, again) and texts == same
    assert x.min() >= -1 and x.max() <= 1 and all(t.strip() for t in texts)


def test_ctc_greedy_merges_repeats_and_drops_blanks():
    alphabet = ["<blank>", "a", "b"]
    steps = [1, 1, 0, 1, 2, 2, 0, 0, 2]  # a a _ a b b _ _ b -> "aabb"
    probs = np.eye(3)[steps][None]
    assert ctc_greedy(probs, alphabet) == "aabb"


def test_edit_distance_counts_single_character_edits():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "abc") == 0
    assert edit_distance("invoice", "lnvoice 1") == 3
