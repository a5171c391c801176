"""intq.tflite.options: node attributes <-> options tables, and where an options object goes."""

import copy

import pytest
from ai_edge_litert import schema_py_generated as schema

from intq.tflite.errors import TfliteExportError, TfliteOpError, UnknownOperatorError
from intq.tflite.options import OPTIONS, REQUIRED_OPTIONS, attrs_to_options, check_options, default_attrs, options_to_attrs


@pytest.mark.parametrize("op", sorted(OPTIONS))
def test_defaults_round_trip(op):
    attrs = default_attrs(op)
    options = attrs_to_options(op, attrs, "n")
    assert (options is None) == (OPTIONS[op] is None)
    assert options_to_attrs(op, options) == attrs


def test_attributes_become_fields_and_enums_names():
    attrs = {"padding": "VALID", "stride_w": 2, "stride_h": 1, "fused_activation_function": "RELU6"}
    options = attrs_to_options("CONV_2D", attrs, "conv")
    assert type(options) is schema.Conv2DOptionsT
    assert (options.padding, options.strideW, options.strideH) == (schema.Padding.VALID, 2, 1)
    assert options.fusedActivationFunction == schema.ActivationFunctionType.RELU6
    back = options_to_attrs("CONV_2D", options)
    assert {k: back[k] for k in attrs} == attrs
    squeeze = attrs_to_options("SQUEEZE", {"squeeze_dims": (0, 2)})
    assert squeeze.squeezeDims == [0, 2] and options_to_attrs("SQUEEZE", squeeze)["squeeze_dims"] == (0, 2)
    # kept: LiteRT's optimized 16x8 FULLY_CONNECTED takes ruy only when it is not INT64 (measured)
    assert default_attrs("FULLY_CONNECTED")["quantized_bias_type"] == "FLOAT32"  # the schema's default: unset
    fc = attrs_to_options("FULLY_CONNECTED", {"quantized_bias_type": "INT64"})
    assert fc.quantizedBiasType == schema.TensorType.INT64
    assert options_to_attrs("FULLY_CONNECTED", fc)["quantized_bias_type"] == "INT64"


def test_attribute_errors_name_the_node():
    with pytest.raises(TfliteOpError, match=r"node 'c' \(CONV_2D\): attributes \['kernel'\]"):
        attrs_to_options("CONV_2D", {"kernel": 3}, "c")
    with pytest.raises(TfliteOpError, match=r"node 'c' \(CONV_2D\): padding='FULL'; expected one of"):
        attrs_to_options("CONV_2D", {"padding": "FULL"}, "c")
    with pytest.raises(TfliteOpError, match="'FLOOR_DIV' is not an operator intq writes") as e:
        default_attrs("FLOOR_DIV")
    assert isinstance(e.value, TfliteExportError)  # every error of writing a file is one


def test_check_options_places_the_union():
    conv = schema.Conv2DOptionsT()
    field, code, copied = check_options("op 0", "CONV_2D", conv)
    assert (field, code) == ("builtinOptions", schema.BuiltinOptions.Conv2DOptions) and copied is not conv
    field, code, _ = check_options("op 0", "STABLEHLO_COMPOSITE", schema.StableHLOCompositeOptionsT())
    assert (field, code) == ("builtinOptions2", schema.BuiltinOptions2.StableHLOCompositeOptions)
    assert check_options("op 0", "RELU", None) == (None, 0, None)
    for op in REQUIRED_OPTIONS:
        with pytest.raises(UnknownOperatorError, match=f"op 1: needs a {OPTIONS[op]}T"):
            check_options("op 1", op, None)
    with pytest.raises(UnknownOperatorError, match="takes Conv2DOptionsT, not FullyConnectedOptionsT"):
        check_options("op 2", "CONV_2D", schema.FullyConnectedOptionsT())
    with pytest.raises(UnknownOperatorError, match="schema options object"):
        check_options("op 3", "CONV_2D", copy.copy)
