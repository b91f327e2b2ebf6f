"""The text of lowered, compiled and exported programs against JAX 0.10.2: which of them carry
the ops' source locations, the `debug_info` keyword, and MLIR's custom assembly form."""
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import export as jexport

import fluxion
import fluxion.numpy as jnp
from fluxion import export

X = np.linspace(-1.0, 1.0, 3, dtype=np.float32)


def _f(lib):
    def f(x):
        return lib.sin(x) * 2  # USER-LINE
    return f


USER_LINE = next(i for i, l in enumerate(open(__file__), 1) if "# USER-LINE" in l)


def _both_lowered():
    return fluxion.jit(_f(jnp)).lower(X), jax.jit(_f(jjnp)).lower(X)


def _main_ops(text):
    """The op lines of @main, as a set (JAX hoists constants, so the order can differ)."""
    body = text[text.index("func.func public @main"):]
    body = body[body.index("\n") + 1:body.index("\n  }")]
    return {line.strip() for line in body.splitlines()}


def test_as_text_has_locations_only_with_debug_info():
    ours, theirs = _both_lowered()
    for lowered in (ours, theirs):
        assert "loc(" not in lowered.as_text()
        assert "loc(" not in lowered.as_text("stablehlo")
        assert "loc(" in lowered.as_text(debug_info=True)
    located = ours.as_text(debug_info=True)
    assert f'"{__file__}":{USER_LINE}:' in located and '"jit(f)/sin"' in located
    # locations fluxion did not write are unknown, as in JAX (not MLIR's parser positions)
    assert 'loc("-"' not in located


def test_as_text_prints_the_custom_assembly_form_as_jax():
    ours, theirs = _both_lowered()
    assert _main_ops(ours.as_text()) == _main_ops(theirs.as_text())
    assert "%0 = stablehlo.sine %arg0 : tensor<3xf32>" in ours.as_text()


def test_hlo_text_has_metadata_only_with_debug_info():
    ours, theirs = _both_lowered()
    for lowered in (ours, theirs):
        assert "metadata=" not in lowered.as_text("hlo")
        assert 'op_name="jit(f)/sin"' in lowered.as_text("hlo", debug_info=True)


def test_compiler_ir_prints_without_locations():
    ours, theirs = _both_lowered()
    for lowered in (ours, theirs):
        assert "loc(" not in str(lowered.compiler_ir())
        assert "loc(" in lowered.compiler_ir().operation.get_asm(enable_debug_info=True)


def test_compiled_text_has_the_source_metadata():
    ours, theirs = _both_lowered()
    for lowered in (ours, theirs):
        assert 'op_name="jit(f)/sin"' in lowered.compile().as_text()
    assert f'FileNames\n1 "{__file__}"' in ours.compile().as_text()


def _both_exported():
    return (export.export(fluxion.jit(_f(jnp)))(fluxion.ShapeDtypeStruct(X.shape, X.dtype)),
            jexport.export(jax.jit(_f(jjnp)))(jax.ShapeDtypeStruct(X.shape, X.dtype)))


def test_exported_mlir_module_has_locations_as_jax():
    ours, theirs = _both_exported()
    for exp in (ours, theirs):
        assert "loc(" in exp.mlir_module()
    assert f'"{__file__}":{USER_LINE}:' in ours.mlir_module()
    assert _main_ops(re.sub(r" loc\(#loc\d*\)", "", ours.mlir_module())) == _main_ops(
        re.sub(r" loc\(#loc\d*\)", "", theirs.mlir_module()))


@pytest.fixture
def no_debug_info_in_dumps():
    fluxion.config.update("jax_include_debug_info_in_dumps", False)
    jax.config.update("jax_include_debug_info_in_dumps", False)
    yield
    fluxion.config.update("jax_include_debug_info_in_dumps", True)
    jax.config.update("jax_include_debug_info_in_dumps", True)


def test_exported_mlir_module_follows_the_dumps_flag(no_debug_info_in_dumps):
    ours, theirs = _both_exported()
    for exp in (ours, theirs):
        assert "loc(" not in exp.mlir_module()
    # the artifact keeps its locations: only the printing leaves them out
    module = ours.mlir_module(serialized=False)
    assert f'"{__file__}":{USER_LINE}:' in module.operation.get_asm(enable_debug_info=True)
    assert str(module) == ours.mlir_module()


def test_several_platforms_print_the_index_argument_as_jax():
    ours = fluxion.jit(lambda x: x * 2).trace(1.0).lower(lowering_platforms=("cpu", "cuda"))
    theirs = jax.jit(lambda x: x * 2).trace(1.0).lower(lowering_platforms=("cpu", "cuda"))
    for lowered in (ours, theirs):
        text = lowered.as_text()
        assert "@main(%arg0: tensor<i32>" in text and "%arg1: tensor<f32>)" in text
        assert "loc(" not in text
