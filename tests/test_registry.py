"""intq.registry: one decorator-filled table shape for every op / rule / observer table."""

import pytest

from intq.errors import IntqError, QuantizationError, UnsupportedOperatorError
from intq.registry import Registry


def test_register_under_name_or_keys_and_iterate_in_order():
    table = Registry("thing")

    @table.register()
    def Alpha():
        return 1

    @table.register("Beta", "Gamma")
    def shared():
        return 2

    assert list(table) == ["Alpha", "Beta", "Gamma"]
    assert table["Alpha"] is Alpha and table.lookup("Gamma") is shared
    assert "Beta" in table and "shared" not in table and len(table) == 3
    assert dict(table.items()) == {"Alpha": Alpha, "Beta": shared, "Gamma": shared}


def test_missing_key_raises_the_tables_error_listing_every_entry():
    table = Registry("observer class", QuantizationError)
    table.register("Zeta", "Eta")(object)
    with pytest.raises(QuantizationError, match=r"no observer class for 'Nope'; available: Eta, Zeta$"):
        table.lookup("Nope")
    with pytest.raises(UnsupportedOperatorError):
        Registry("op").lookup("X")
    assert issubclass(Registry("op").error, IntqError)


def test_tuple_keys_for_kernels_by_op_and_dtype():
    kernels = Registry("integer kernel")
    kernels.register(("CONV_2D", "int8"), ("CONV_2D", "int16"))(object)
    assert kernels.lookup(("CONV_2D", "int16")) is object
    with pytest.raises(UnsupportedOperatorError, match=r"'ADD/int8'; available: CONV_2D/int16, CONV_2D/int8"):
        kernels.lookup(("ADD", "int8"))


def test_a_key_registered_twice_is_refused():
    table = Registry("rule")
    table.register("Conv")(object)
    with pytest.raises(AssertionError, match="registered twice"):
        table.register("Conv")(int)
    assert table["Conv"] is object


def test_every_table_is_a_registry():
    from intq.calibration.observers import OBSERVERS
    from intq.convert.rules import RULES
    from intq.frontends.from_onnx import NORMALIZERS
    from intq.qat.ops import TORCH_OPS
    from intq.runtime.float_ops import FLOAT_OPS

    for table in (OBSERVERS, RULES, NORMALIZERS, TORCH_OPS, FLOAT_OPS):
        assert isinstance(table, Registry) and len(table) > 0
    assert "Conv" in RULES and "Conv" in FLOAT_OPS and "Conv" in TORCH_OPS and "Softmax" in NORMALIZERS
    assert OBSERVERS.lookup("EntropyObserver").method == "entropy"
