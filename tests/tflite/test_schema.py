"""intq.tflite.schema: the tables agree with LiteRT's generated schema and with each other."""

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from intq.tflite.errors import UnknownOperatorError
from intq.tflite.options import OPTIONS
from intq.tflite.schema import (FILE_IDENTIFIER, MAX_VERSION, TENSOR_TYPE_DTYPES, TENSOR_TYPE_NAMES, TENSOR_TYPES,
                                builtin_op_code, builtin_op_name, deprecated_code, is_tflite_bytes, operator_code)


def test_tensor_types_are_named_after_their_dtypes_both_ways():
    assert len(TENSOR_TYPE_DTYPES) == len(TENSOR_TYPES)  # one to one
    for dtype, code in TENSOR_TYPES.items():
        assert TENSOR_TYPE_NAMES[code] == dtype.name.upper()  # INT8 <-> int8, BOOL <-> bool, FLOAT32 <-> float32
        assert TENSOR_TYPE_DTYPES[code] == dtype
    assert TENSOR_TYPE_DTYPES[schema.TensorType.FLOAT16] == np.float16  # the converter's float16 weights
    assert TENSOR_TYPE_NAMES[schema.TensorType.COMPLEX64] == "COMPLEX64" and schema.TensorType.COMPLEX64 not in TENSOR_TYPE_DTYPES


def test_operator_codes():
    assert builtin_op_code("CONV_2D") == 3 and builtin_op_code("conv_2d") == 3 and builtin_op_code(150) == 150
    assert builtin_op_name(3) == "CONV_2D" and builtin_op_name(150) == "GELU" and builtin_op_name(127) is None
    for bad in ("CONV_3000", 127, -1, True, 3.0):
        with pytest.raises(UnknownOperatorError):
            builtin_op_code(bad)
    assert (deprecated_code(3), deprecated_code(126), deprecated_code(150)) == (3, 126, 127)
    for builtin, deprecated, want in ((3, 3, 3), (0, 3, 3), (150, 127, 150)):  # old files fill only the deprecated field
        oc = schema.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode = builtin, deprecated
        assert operator_code(oc) == want


def test_every_operator_intq_reads_is_a_builtin_with_an_options_entry():
    for op, version in MAX_VERSION.items():
        assert builtin_op_name(builtin_op_code(op)) == op and version >= 1
        assert op in OPTIONS  # the importer looks up the options table of every operator it accepts


def test_identifier():
    assert FILE_IDENTIFIER == b"TFL3"
    assert is_tflite_bytes(b"\x1c\x00\x00\x00TFL3rest") and is_tflite_bytes(bytearray(b"xxxxTFL3"))
    assert not is_tflite_bytes(b"xxxxTFL") and not is_tflite_bytes(b"xxxxTFL2....") and not is_tflite_bytes(b"")
    assert is_tflite_bytes(memoryview(np.frombuffer(b"\0\0\0\0TFL3", np.uint8).tobytes()))
