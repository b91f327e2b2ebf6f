"""Stax: neural networks as (init_fun, apply_fun) pairs, with jax.example_libraries.stax's API.

A layer constructor returns `init_fun(rng, input_shape) -> (output_shape, params)` and
`apply_fun(params, inputs, **kwargs) -> outputs`; `serial` and `parallel` combine layers. The
random draws happen in JAX's order, so a key gives the same parameters in both frameworks.
"""
import functools
import math

import fluxion.numpy as jnp
from fluxion import lax, random
from fluxion.nn import (elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax,
                        softplus, standardize)
from fluxion.nn.initializers import glorot_normal, normal, ones, zeros

glorot, randn, logsoftmax = glorot_normal, normal, log_softmax  # older names


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: inputs @ W + b."""
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        params = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))
        return input_shape[:-1] + (out_dim,), params

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _conv_kernel_shape(rhs_spec, lhs_spec, input_shape, out_chan, filter_shape):
    spatial = iter(filter_shape)
    return [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
            else next(spatial) for c in rhs_spec]


def _conv_layer(shape_rule, apply_rule):
    def constructor(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
                    W_init=None, b_init=normal(1e-6)):
        lhs_spec, rhs_spec, out_spec = dimension_numbers
        one = (1,) * len(filter_shape)
        strides = strides or one
        W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

        def init_fun(rng, input_shape):
            kernel_shape = _conv_kernel_shape(rhs_spec, lhs_spec, input_shape, out_chan,
                                              filter_shape)
            output_shape = shape_rule(input_shape, kernel_shape, strides, padding,
                                      dimension_numbers)
            bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
            k1, k2 = random.split(rng)
            return output_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

        def apply_fun(params, inputs, **kwargs):
            W, b = params
            return apply_rule(inputs, W, strides, padding, one, dimension_numbers) + b
        return init_fun, apply_fun
    return constructor


def _conv_transpose_shape(input_shape, kernel_shape, strides, padding, dimension_numbers):
    """Output shape of lax.conv_transpose (computed by tracing it abstractly)."""
    import fluxion
    out = fluxion.eval_shape(
        lambda x, w: lax.conv_transpose(x, w, strides, padding,
                                        dimension_numbers=dimension_numbers),
        fluxion.ShapeDtypeStruct(tuple(input_shape), jnp.float32),
        fluxion.ShapeDtypeStruct(tuple(kernel_shape), jnp.float32))
    return out.shape


GeneralConv = _conv_layer(
    lax.conv_general_shape_tuple,
    lambda x, W, strides, padding, one, dn: lax.conv_general_dilated(
        x, W, strides, padding, one, one, dimension_numbers=dn))
GeneralConv.__name__ = "GeneralConv"
GeneralConv.__doc__ = "A convolution layer with the given (lhs, rhs, out) dimension specs."
Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))

GeneralConvTranspose = _conv_layer(
    _conv_transpose_shape,
    lambda x, W, strides, padding, one, dn: lax.conv_transpose(
        x, W, strides, padding, dimension_numbers=dn))
GeneralConvTranspose.__name__ = "GeneralConvTranspose"
GeneralConvTranspose.__doc__ = "A transposed convolution layer with the given dimension specs."
Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
    """Normalizes over `axis` with the batch's statistics, then scales and shifts."""
    axis = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        expand = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        if center:
            z = z + beta[expand]
        return z
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying `fun` to its input."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _with_unit_axes(window, axes):
    for i in sorted(axes):
        window = window[:i] + (1,) + window[i:]
    return window


def _non_spatial_axes(spec, ndim):
    return (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))


def _pooling_layer(reducer, init_val, average=False):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        """A pooling layer over the spatial axes (all but N and C of `spec`, NHWC default)."""
        window_shape = tuple(window_shape)
        spatial_strides = tuple(strides or (1,) * len(window_shape))
        axes = _non_spatial_axes(spec, len(window_shape) + 2)
        dims = _with_unit_axes(window_shape, axes)
        full_strides = _with_unit_axes(spatial_strides, axes)

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, dims, full_strides, padding)
            ones_ = (1,) * len(dims)
            return lax.reduce_window_shape_tuple(input_shape, dims, full_strides, pads, ones_,
                                                 ones_), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, dims, full_strides, padding)
            if not average:
                return out
            # Divide by the number of in-bounds elements under each window.
            spatial = tuple(d for i, d in enumerate(inputs.shape) if i not in axes)
            counts = lax.reduce_window(jnp.ones(spatial, inputs.dtype), 0.0, lax.add,
                                       window_shape, spatial_strides, padding)
            for i in sorted(axes):
                counts = jnp.expand_dims(counts, i)
            return out / counts
        return init_fun, apply_fun
    return PoolingLayer


MaxPool = _pooling_layer(lax.max, -jnp.inf)
SumPool = _pooling_layer(lax.add, 0.0)
AvgPool = _pooling_layer(lax.add, 0.0, average=True)


def _flatten():
    def init_fun(rng, input_shape):
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.reshape(inputs, (inputs.shape[0], -1))
    return init_fun, apply_fun


Flatten = _flatten()
Identity = elementwise(lambda x: x)


def FanOut(num):
    """A layer sending its input to `num` branches."""
    return (lambda rng, input_shape: ([input_shape] * num, ()),
            lambda params, inputs, **kwargs: [inputs] * num)


FanInSum = (lambda rng, input_shape: (input_shape[0], ()),
            lambda params, inputs, **kwargs: sum(inputs))


def FanInConcat(axis=-1):
    """A layer concatenating its branches along `axis`."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return input_shape[0][:ax] + (size,) + input_shape[0][ax + 1:], ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """Keeps each input with probability `rate` (scaled by 1/rate) when mode is 'train';
    apply_fun needs an `rng=` key then."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key "
                             "argument. That is, instead of `apply_fun(params, inputs)`, call "
                             "it like `apply_fun(params, inputs, rng)` where `rng` is a PRNG "
                             "key (e.g. from `jax.random.key`).")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


def serial(*layers):
    """Layers applied one after the other."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, layer_params = init(layer_rng, input_shape)
            params.append(layer_params)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        for apply, layer_params, layer_rng in zip(apply_funs, params, rngs):
            inputs = apply(layer_params, inputs, rng=layer_rng, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Layers applied to the matching entries of a list of inputs."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        rngs = random.split(rng, len(layers))
        return zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)])

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built from the input shape by `make_layer(input_shape)`."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
