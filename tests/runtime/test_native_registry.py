"""The native forms bind through the kernel registry (intq.runtime.native.registry): every key names a
registered kernel, a form reads the parameters its kernel prepares without a ladder of parameter
types (at most the two type checks a kernel's run may have, tests/kernels/test_registry.py) and
without naming a runtime, and the plan asks for the form under the key of the kernel it chose."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np

from intq.kernels import KERNELS, get_target
from intq.runtime.native import accelerate
from intq.runtime.native.registry import NATIVE
from intq.runtime.plan import ExecutionPlan

from ..kernels.harness import single_op_graph, tensor
from ..kernels.test_registry import _type_checks

TARGET_NAMES = ("tflite", "litert", "xnnpack", "ort", "tpu", "opt")


def test_every_native_form_binds_a_registered_kernel():
    assert len(NATIVE) > 20
    assert set(NATIVE) <= set(KERNELS), set(NATIVE) - set(KERNELS)


def test_no_native_form_dispatches_on_parameter_types_more_than_twice():
    ladders = {f"{b.__module__}.{b.__name__}": _type_checks(b) for b in set(NATIVE.values())}
    assert all(n <= 2 for n in ladders.values()), {k: n for k, n in ladders.items() if n > 2}


def test_no_native_form_asks_which_runtime_it_serves():
    """A form never compares a target or family name (the registry key says which kernel it is)."""
    for build in set(NATIVE.values()):
        fn = ast.parse(textwrap.dedent(inspect.getsource(build))).body[0]  # its body: the decorators name families
        for node in ast.walk(ast.Module(body=fn.body, type_ignores=[])):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value:
                assert not node.value.startswith(TARGET_NAMES), (build.__name__, node.value)


def test_the_plan_binds_the_form_of_the_chosen_kernel(monkeypatch):
    """The plan passes the chosen kernel's key: a form registered only under one family is asked
    for that family's kernels and no other (here: LOGISTIC's litert variant, target litert-ref)."""
    asked = []
    original = accelerate.native_run

    def spy(key, node, graph, params, lib=None):
        asked.append(key)
        return original(key, node, graph, params, lib)

    monkeypatch.setattr(accelerate, "native_run", spy)
    graph = single_op_graph("LOGISTIC", [tensor("x", (2, 64), scale=0.05, zero_point=3)],
                            [tensor("y", (2, 64), scale=1 / 256, zero_point=-128)])
    for target, family in (("tflite", "reference"), ("litert-ref", "litert")):
        asked.clear()
        plan = ExecutionPlan(graph, get_target(target))
        assert asked == [("LOGISTIC", "int8", family)] == [plan.keys[graph.nodes[0].name]]
        x = np.arange(-128, 128, dtype=np.int8).reshape(2, 128)[:, :64].copy()
        run, params = plan.kernels[graph.nodes[0].name]
        np.testing.assert_array_equal(plan.steps[0].run(x)[0], run(params, x)[0])
