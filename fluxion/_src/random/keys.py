"""PRNG keys: legacy raw keys (uint32[..., 2] arrays) and typed keys (`PRNGKeyArray`).

A typed key array of shape S is a pytree with one leaf, its key data uint32[*S, 2]; so it passes
through jit (as argument and result), vmap, scan and the other transformations as that array,
and is rebuilt on the other side. Every sampler takes either kind of key and works on the raw
data.
"""
from __future__ import annotations

import math
import re
import warnings
import operator
from collections.abc import Sequence

import numpy as np

import fluxion.numpy as jnp
from fluxion._src import basearray, core, dtypes
from fluxion._src import api as api_module, key_flow
from fluxion._src.api import jit
from fluxion._src.random._common import static_jit
from fluxion._src.numpy.util import is_arraylike
from fluxion._src.config import config
from fluxion._src.lax import lax
from fluxion._src.random import prng
from fluxion._src.tree_util import register_pytree_node, tree_leaves

IMPL_NAME = "threefry2x32"
# The PRNG implementations JAX registers; only threefry2x32 exists in fluxion.
_JAX_IMPL_NAMES = ("philox2x32", "philox4x32", "threefry2x32", "rbg", "unsafe_rbg",
                   "threefry4x32")


class KeyTy:
    """The dtype of typed threefry2x32 keys; it prints as JAX's does, `key<fry>`."""

    name = "key<fry>"
    itemsize = 8  # two uint32 words
    _impl_name = IMPL_NAME

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return type(other) is KeyTy

    def __hash__(self):
        return hash(KeyTy)


KEY_DTYPE = KeyTy()


def resolve_impl(impl) -> str:
    """Check a PRNG implementation spec (None, a name or a key dtype); only threefry2x32."""
    if impl is None:
        impl = config.default_prng_impl  # `jax.default_prng_impl`
    if isinstance(impl, KeyTy) or impl == IMPL_NAME:
        return IMPL_NAME
    if isinstance(impl, str):
        if impl in _JAX_IMPL_NAMES:
            raise NotImplementedError(f"fluxion.random implements only the threefry2x32 PRNG, "
                                      f"not {impl!r}.")
        names = ", ".join(f'"{n}"' for n in _JAX_IMPL_NAMES)
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
                         f'{names}?')
    raise TypeError(f"unrecognized type {type(impl)} for specifying PRNG implementation.")


def key_dtype(impl=None) -> KeyTy:
    """The dtype of typed keys of a PRNG implementation (only threefry2x32)."""
    resolve_impl(impl)
    return KEY_DTYPE


class KeyShapedArray:
    """The abstract value of a key array, as `typeof` gives it: `ShapedArray(key<fry>[2])`."""

    __slots__ = ("shape",)
    dtype = KEY_DTYPE
    weak_type = False

    def __init__(self, shape):
        self.shape = tuple(shape)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def str_short(self, short_dtypes: bool = True) -> str:
        return f"{KEY_DTYPE.name}[{','.join(map(str, self.shape))}]"

    __str__ = str_short

    def __repr__(self):
        return f"ShapedArray({self.str_short()})"

    def __eq__(self, other):
        return type(other) is KeyShapedArray and other.shape == self.shape

    def __hash__(self):
        return hash(("key", self.shape))


# The uint32 key data's type in a tracer's repr (`uint32[3,2]`), and the key type it stands for
_KEY_DATA_TYPE = re.compile(r"uint32\[((?:[^\]]*,)?)2\]")


def _key_type_text(match) -> str:
    return f"{KEY_DTYPE.name}[{match.group(1).rstrip(',')}]"


class PRNGKeyArray:
    """An array of typed PRNG keys (JAX's `key<fry>` arrays), backed by uint32 key data.

    Keys support shape queries, indexing, iteration over the leading axis, reshaping and
    equality; arithmetic and conversion to NumPy raise TypeError, as in JAX.
    """

    # With `jax.debug_key_reuse` set: _consumed, whether (or which elements, a bool mask) a
    # random function used it; _origin, the key_flow scope it was made in; _forward, the key
    # it views in a jaxpr (consuming this key consumes that one).
    __slots__ = ("_base_array", "_consumed", "_origin", "_forward", "__weakref__")
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, key_data):
        self._base_array = key_data
        self._consumed = False
        self._forward = None
        self._origin = None
        if config.debug_key_reuse:
            self._origin = key_flow.current_scope()
            key_flow.note_key(self)

    # ---- array-like attributes
    shape = property(lambda self: tuple(self._base_array.shape[:-1]))
    ndim = property(lambda self: len(self._base_array.shape) - 1)
    size = property(lambda self: math.prod(self.shape))
    dtype = property(lambda self: KEY_DTYPE)
    itemsize = property(lambda self: KEY_DTYPE.itemsize)
    nbytes = property(lambda self: KEY_DTYPE.itemsize * self.size)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        # as in JAX, iterating does not consume elements of the array (indexing does)
        return (PRNGKeyArray(self._base_array[i]) for i in range(self.shape[0]))

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. Use "
                        "jax.random.key_data(arr) if you wish to extract the underlying integer "
                        "array.")

    def __repr__(self):
        if isinstance(self._base_array, core.Tracer):  # as JAX prints a traced key array
            return _KEY_DATA_TYPE.sub(_key_type_text, repr(self._base_array))
        return f"Array({self.shape}, dtype={KEY_DTYPE.name}) overlaying:\n{self._base_array}"

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        mask = None
        if config.debug_key_reuse:
            # JAX's `slice` consumes the elements it takes and makes fresh keys of them.
            mask = key_flow.index_mask(self.shape, index)
            if mask is not None:
                key_flow.consume("slice", self, mask)
        if any(i is Ellipsis for i in index):
            index = index + (slice(None),)  # keep the key words out of the ellipsis
        elif sum(i is not None for i in index) > self.ndim:
            raise IndexError(f"Too many indices: {self.ndim}-dimensional key array indexed with "
                             f"{len(index)} regular indices.")
        out = PRNGKeyArray(self._base_array[index])
        if config.debug_key_reuse and mask is None:  # a traced index: a gather
            key_flow.forward(self, out)
        return out

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return jnp.all(jnp.equal(self._base_array, other._base_array), axis=-1)

    def __ne__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return jnp.logical_not(self == other)

    def _no_arithmetic(self, *args):
        raise TypeError(f"{KEY_DTYPE.name} arrays do not support arithmetic or comparison "
                        "operators other than == and !=.")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_arithmetic
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __pow__ = _no_arithmetic
    __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __invert__ = _no_arithmetic
    __and__ = __or__ = __xor__ = __lshift__ = __rshift__ = _no_arithmetic

    # ---- shape manipulation, acting on the leading (key) dimensions only
    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(operator.index(d) for d in shape)
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            shape = tuple(self.size // max(known, 1) if d == -1 else d for d in shape)
        return self._forwarded(jnp.reshape(self._base_array, shape + prng.KEY_SHAPE, order=order))

    def ravel(self, order="C"):
        return self.reshape((self.size,), order=order)

    flatten = ravel

    def squeeze(self, axis=None):
        if axis is None:
            axis = tuple(i for i, d in enumerate(self.shape) if d == 1)
        axes = axis if isinstance(axis, tuple) else (axis,)
        axes = tuple(operator.index(a) % max(self.ndim, 1) for a in axes)
        return self._forwarded(jnp.squeeze(self._base_array, axes))

    def transpose(self, *axes):
        if not axes or axes == (None,):
            axes = tuple(reversed(range(self.ndim)))
        elif len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        axes = tuple(operator.index(a) % self.ndim for a in axes)
        if config.debug_key_reuse:  # JAX has no key rule for transpose: it consumes
            key_flow.consume("transpose", self)
        return PRNGKeyArray(jnp.transpose(self._base_array, axes + (self.ndim,)))

    T = property(lambda self: self.transpose())

    def swapaxes(self, axis1, axis2):
        perm = list(range(self.ndim))
        a, b = operator.index(axis1) % self.ndim, operator.index(axis2) % self.ndim
        perm[a], perm[b] = perm[b], perm[a]
        return self.transpose(tuple(perm))

    def take(self, indices, axis=None):
        if axis is None:
            return self._forwarded(jnp.take(self.ravel()._base_array, indices, axis=0))
        return self._forwarded(jnp.take(self._base_array, indices,
                                        axis=operator.index(axis) % self.ndim))

    def _forwarded(self, data):
        """A key array of `data`, computed from this one by an op JAX forwards."""
        out = PRNGKeyArray(data)
        if config.debug_key_reuse:
            key_flow.forward(self, out)
        return out

    def copy(self):
        return self._forwarded(self._base_array)

    def block_until_ready(self):
        self._base_array.block_until_ready()
        return self

    # ---- placement: that of the key data
    def devices(self) -> set:
        return self._base_array.devices()

    device = property(lambda self: self._base_array.device)
    sharding = property(lambda self: self._base_array.sharding)
    committed = property(lambda self: self._base_array.committed)
    is_fully_addressable = property(lambda self: self._base_array.is_fully_addressable)
    is_fully_replicated = property(lambda self: self._base_array.is_fully_replicated)

    @property
    def addressable_shards(self) -> list:
        """The key data's shards, each holding its block as a key array."""
        return [_key_shard(shard) for shard in self._base_array.addressable_shards]

    @property
    def global_shards(self) -> list:
        return [_key_shard(shard) for shard in self._base_array.global_shards]

    def addressable_data(self, index: int) -> "PRNGKeyArray":
        return PRNGKeyArray(self._base_array.addressable_data(index))

    # ---- the buffer: that of the key data
    def is_deleted(self) -> bool:
        return self._base_array.is_deleted()

    def delete(self) -> None:
        self._base_array.delete()

    def copy_to_host_async(self) -> None:
        self._base_array.copy_to_host_async()

    def on_device_size_in_bytes(self) -> int:
        return self._base_array.on_device_size_in_bytes()

    def unsafe_buffer_pointer(self) -> int:
        return self._base_array.unsafe_buffer_pointer()


def _key_shard(shard):
    """`shard` of key data as a shard of keys. Its index stays that of the key data (one
    slice more than the keys have dimensions), as in JAX."""
    from fluxion._src.global_array import Shard
    return Shard(shard.device, shard.index, shard.replica_id, PRNGKeyArray(shard.data))


key_flow.KEY_TYPE = PRNGKeyArray
basearray.Array.register(PRNGKeyArray)  # key arrays are fluxion Arrays, as in JAX


def _unflatten(_, children):
    key = PRNGKeyArray(children[0])
    if config.debug_key_reuse:  # rebuilt from the data of a traced key: that key, in a jaxpr
        key_flow.forward_same_data(key)
    return key


register_pytree_node(PRNGKeyArray, lambda k: ((k._base_array,), None), _unflatten)


# ---------------------------------------------------------------------------------------------
# Accepting keys

def check_key_data(key_data) -> None:
    """TypeError unless `key_data` is uint32 key data, shape (..., 2) (JAX's messages)."""
    if not all(hasattr(key_data, attr) for attr in ("ndim", "shape", "dtype")):
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data to have ndim, "
                        f"shape, and dtype attributes. Got {key_data}")
    if key_data.ndim < 1:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.ndim >= 1; "
                        f"got ndim={key_data.ndim}")
    if tuple(key_data.shape[-1:]) != prng.KEY_SHAPE:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.shape to end "
                        f"with {prng.KEY_SHAPE}; got shape={tuple(key_data.shape)} for "
                        f"impl={IMPL_NAME}")
    if key_data.dtype not in (dtypes.uint32, dtypes.float0):
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={key_data.dtype}")


# Functions that read a key without consuming it (for `jax.debug_key_reuse`).
_NOT_CONSUMING = frozenset({"key_data", "key_impl", "fold_in"})


def check_key(name: str, key, allow_batched: bool = False):
    """(raw key data, whether `key` was typed) for a key passed to a random function."""
    if isinstance(key, PRNGKeyArray):
        data, typed, shape = key._base_array, True, key.shape
    elif is_arraylike(key):
        check_key_data(key)
        data, typed, shape = key, False, tuple(key.shape)
        _check_legacy_key()
    else:
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    if not allow_batched and len(shape) != (0 if typed else 1):
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{shape} != (). Use jax.vmap for batching.")
    if typed and config.debug_key_reuse and name not in _NOT_CONSUMING:
        _consume(name, key)
    return data, typed


def _consume(name: str, key, index: int = 0) -> None:
    """KeyReuseError if `key` was consumed before; else mark it consumed (see key_flow)."""
    key_flow.consume(name, key, True, index)


class _KeyEffects:
    """What a traced function does to typed keys: `consumed`, (leaf index, None, mask) for
    the keys among its arguments and (None, key, mask) for those it closes over; `forwards`,
    result leaf index -> the argument leaf index it returns unchanged."""

    __slots__ = ("consumed", "forwards")

    def __init__(self, consumed, forwards):
        self.consumed, self.forwards = consumed, forwards

    def __bool__(self):
        return bool(self.consumed or self.forwards)


def _key_effects(args, scope) -> _KeyEffects:
    """The key effects of a function traced in `scope`, called on (dynamic) `args`."""
    consumed = (tuple((i, None, key._consumed) for i, key in key_flow.keys_by_leaf(args)
                      if np.any(key._consumed))
                + tuple((None, key, mask) for key, mask in scope.closed.values()))
    return _KeyEffects(consumed, scope.forwards())


def _consume_arguments(args, effects) -> None:
    """A jitted function called on `args` consumes keys as `effects` says (JAX numbers its
    constants after its arguments)."""
    keys = dict(key_flow.keys_by_leaf(args))
    const_index = len(tree_leaves(args))
    for i, key, mask in effects.consumed:
        if key is not None:
            key_flow.consume("jit", key, mask, const_index)
            const_index += 1
        elif i in keys:
            key_flow.consume("jit", keys[i], mask, i)


def _forward_results(args, result, effects) -> None:
    """The keys a jitted function returns unchanged are its argument keys (JAX's Forward)."""
    if effects.forwards:
        ins, outs = dict(key_flow.keys_by_leaf(args)), dict(key_flow.keys_by_leaf(result))
        for o, i in effects.forwards.items():
            if i in ins and o in outs:
                key_flow.forward(ins[i], outs[o])


api_module.key_reuse_hooks = (_key_effects, _consume_arguments, _forward_results)


_LEGACY_KEY_MESSAGE = ("Legacy uint32 key array passed as key to jax.random function. Please "
                       "create keys using jax.random.key(). If use of a raw key array was "
                       'intended, set jax_legacy_prng_key="allow".')


def _check_legacy_key() -> None:
    """`jax.legacy_prng_key` ('warn' or 'error') and `jax.enable_custom_prng` on raw keys."""
    mode = config.legacy_prng_key
    if mode == "error":
        raise ValueError(_LEGACY_KEY_MESSAGE)
    if mode == "warn":
        warnings.warn(_LEGACY_KEY_MESSAGE, stacklevel=3)
    elif config.enable_custom_prng:
        warnings.warn("Raw arrays as random keys to jax.random functions are deprecated. "
                      "Assuming valid threefry2x32 key for now.", FutureWarning, stacklevel=3)


def rewrap(data, typed: bool):
    """Key data back in the kind of key it came from."""
    return PRNGKeyArray(data) if typed else data


# ---------------------------------------------------------------------------------------------
# Creating, splitting and folding keys

_seed_jit = jit(prng.seed)
_split_jit = static_jit(prng.split, 1)
_fold_in_jit = jit(prng.fold_in)


def _seed_array(ctor_name: str, seed):
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given a PRNG key.")
    if np.ndim(seed):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use jax.vmap for batching")
    if isinstance(seed, int):  # Python ints (and bools) are int64 values, narrowed like JAX's
        value = np.int64(seed)
        if not config.enable_x64:
            value = value.astype(np.int32)
        return lax._convert_element_type(value, value.dtype)
    if isinstance(seed, (np.ndarray, np.generic, float, complex)):
        value = np.asarray(seed)
        return lax._convert_element_type(value, dtypes.canonicalize_dtype(value.dtype))
    return seed


def PRNGKey(seed, *, impl=None):
    """A legacy PRNG key: a uint32[2] array holding the high and low 32 bits of `seed`.

    Parameters
    ----------
    seed : a 64- or 32-bit integer scalar (above 32 bits only with x64 enabled).
    impl : must be None or ``'threefry2x32'``.
    """
    resolve_impl(impl)
    data = _seed_jit(_seed_array("PRNGKey", seed))
    return PRNGKeyArray(data) if config.enable_custom_prng else data


def key(seed, *, impl=None, dtype=None):
    """A typed PRNG key (dtype ``key<fry>``, shape ``()``) from an integer seed."""
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to jax.random.key")
    resolve_impl(dtype if dtype is not None else impl)
    return PRNGKeyArray(_seed_jit(_seed_array("key", seed)))


def key_data(keys):
    """The uint32 key data underlying an array of keys (shape ``keys.shape + (2,)``)."""
    data, _ = check_key("key_data", keys, allow_batched=True)
    return data


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys from uint32 key data whose last dimension has size 2."""
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                         "jax.random.wrap_key_data")
    resolve_impl(dtype if dtype is not None else impl)
    check_key_data(key_bits_array)
    if isinstance(key_bits_array, np.ndarray):
        key_bits_array = lax._convert_element_type(key_bits_array, dtypes.uint32)
    return PRNGKeyArray(key_bits_array)


def key_impl(keys) -> str:
    """The name of the PRNG implementation of `keys`: ``'threefry2x32'``."""
    check_key("key_impl", keys, allow_batched=True)
    return IMPL_NAME


def _split_shape(num) -> tuple:
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    shape = tuple(operator.index(core.concrete_or_error(d, "the num argument of split"))
                  for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"split: the number of keys must be non-negative, got num={num}.")
    return shape


def split(key, num=2):
    """Split a key into new keys, along new leading axes.

    Parameters
    ----------
    key : a single PRNG key (typed or raw).
    num : an int (default 2) or a tuple of ints: the shape of the array of new keys.
    """
    data, typed = check_key("split", key)
    return rewrap(_split_jit(data, _split_shape(num)), typed)


def split_data(data, num=2):
    """`split` of raw key data, for use inside samplers."""
    return prng.split(data, _split_shape(num))


def fold_in(key, data):
    """A new key that is a deterministic function of `key` and the 32-bit integer `data`."""
    raw, typed = check_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of"
                        f"shape {np.shape(data)} != (). Use jax.vmap for batching.")
    if type(data) is int and not 0 <= data <= np.iinfo(np.uint32).max:
        raise OverflowError(f"Python integer {data} out of bounds for uint32")
    msg = lax._convert_element_type(data, dtypes.uint32)
    return rewrap(_fold_in_jit(raw, msg), typed)


def clone(key):
    """A copy of `key`, not yet consumed (for `jax.debug_key_reuse`)."""
    if isinstance(key, PRNGKeyArray):
        return PRNGKeyArray(key._base_array)
    return key
