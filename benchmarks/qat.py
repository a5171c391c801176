"""Training-step cost of quantization-aware training vs float training (issue 6: at most 2x).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/qat.py [--steps 60] [--batch 64]

For each model of ``tools/qat_digits.py`` (the digits CNN and the MobileNet-style CNN), one
training step (forward, cross-entropy, backward, Adam step) on a batch of digits is timed for:
the float module; the QAT module while it learns (ranges moving, batch norm on batch statistics);
the QAT module after ``freeze_bn()``; after ``freeze_observers()`` too (the deployed arithmetic,
non-linear ops by intq's integer kernels). One thread for torch; each step timed in CPU time of
the thread (``time.thread_time``: on a shared machine, time spent descheduled is not the step's),
the median of ``--steps`` steps after 5 warm-up steps, the phases interleaved round-robin so
cache and memory-bandwidth noise hits all alike. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import intq  # noqa: E402
from intq.testing.digits import load_split  # noqa: E402
from qat_digits import MODELS  # noqa: E402


def _step_fn(model, opt, x, y):
    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    (x_train, y_train), _ = load_split()
    x = torch.from_numpy(x_train[:args.batch])
    y = torch.from_numpy(y_train[:args.batch])
    print("| model | float step | QAT step (learning) | ratio | QAT, BN frozen | ratio | QAT, BN + observers frozen | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (build, per_channel) in MODELS.items():
        float_model = build().train()
        phases = {"float": float_model}
        for phase in ("learning", "bn", "frozen"):
            q = intq.qat.prepare(copy.deepcopy(float_model), x[:1], per_channel=per_channel, calibration_data=[x])
            if phase in ("bn", "frozen"):
                q.freeze_bn()
            if phase == "frozen":
                q.freeze_observers()
            phases[phase] = q
        steps = {k: _step_fn(m, torch.optim.Adam(m.parameters(), lr=1e-4), x, y) for k, m in phases.items()}
        times = {k: [] for k in steps}
        for i in range(args.steps + 5):
            for k, step in steps.items():
                t0 = time.thread_time()
                step()
                if i >= 5:
                    times[k].append(time.thread_time() - t0)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        cells = [f"{med['float']:.1f} ms"]
        for k in ("learning", "bn", "frozen"):
            cells += [f"{med[k]:.1f} ms", f"{med[k] / med['float']:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
