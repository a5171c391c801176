"""intq.limits: sizes parse, the limit is checked with exact integers, and can be raised."""

import pytest

from intq import limits
from intq.limits import TensorTooLargeError, check_tensor_size, max_tensor_bytes_set, parse_size


def test_parse_size():
    assert parse_size("2G") == 2**31 and parse_size("512M") == 2**29 and parse_size("64kB") == 65536
    assert parse_size("1000") == 1000 and parse_size("1.5GiB") == 3 * 2**29
    for bad in ("", "-1", "0", "G", "2X", "inf"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_the_limit_is_exact_named_and_raisable():
    check_tensor_size((2**29,), "float32", "t")  # exactly 2 GiB: allowed
    with pytest.raises(TensorTooLargeError, match=r"t: shape \[536870913\] of float32 is 2.0 GiB, over intq's limit "
                                                  r"of 2 GiB per tensor.*--max-tensor-size"):
        check_tensor_size((2**29 + 1,), "float32", "t")
    # 2^31 x 2^31 x 2^31 overflows int64 products; Python integers do not
    with pytest.raises(TensorTooLargeError, match="TiB"):
        check_tensor_size((2**31, 2**31, 2**31), "int8", "huge")
    with pytest.raises(TensorTooLargeError, match="negative dimension"):
        check_tensor_size((3, -1), "int8", "neg")
    with max_tensor_bytes_set(2**33):
        check_tensor_size((2**30,), "float32", "t")
        assert limits.max_tensor_bytes() == 2**33
    assert limits.max_tensor_bytes() == limits.DEFAULT_MAX_TENSOR_BYTES


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("INTQ_MAX_TENSOR_BYTES", "1M")
    with max_tensor_bytes_set(None):
        assert limits.max_tensor_bytes() == 2**20
        with pytest.raises(TensorTooLargeError, match="1 MiB"):
            check_tensor_size((1024, 1024), "int16", "x")
