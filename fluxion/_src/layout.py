"""Array layouts (`Layout`, `Format`, as `jax.experimental.layout`).

fluxion keeps every array in XLA's default (row-major, untiled) layout: `jit`, `device_put`
and `with_layout_constraint` accept `Layout.AUTO`, `None` and the default layout, and raise
`NotImplementedError` for any other (see docs/differences.md)."""
from __future__ import annotations

from fluxion._src import core, tree_util
from fluxion._src.sharding_impls import Sharding


class AutoLayoutSingleton:
    def __repr__(self):
        return "AUTO"


AutoLayout = AutoLayoutSingleton()


class Layout:
    """The order of an array's dimensions in memory, most major first, and its tiling."""

    AUTO = AutoLayout

    def __init__(self, major_to_minor, tiling=None, sub_byte_element_size_in_bits: int = 0):
        self.major_to_minor = tuple(major_to_minor)
        self.tiling = None if tiling is None else tuple(map(tuple, tiling))
        self.sub_byte_element_size_in_bits = sub_byte_element_size_in_bits

    def __repr__(self):
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")

    def __hash__(self):
        return hash((self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits))

    def __eq__(self, other):
        return (isinstance(other, Layout) and self.major_to_minor == other.major_to_minor
                and self.tiling == other.tiling
                and self.sub_byte_element_size_in_bits == other.sub_byte_element_size_in_bits)

    def update(self, **kwargs):
        """This layout with the given fields replaced."""
        return Layout(kwargs.get("major_to_minor", self.major_to_minor),
                      kwargs.get("tiling", self.tiling),
                      kwargs.get("sub_byte_element_size_in_bits",
                                 self.sub_byte_element_size_in_bits))

    def check_compatible_aval(self, aval_shape) -> None:
        if len(self.major_to_minor) != len(aval_shape):
            raise ValueError(
                f"Length of major_to_minor and the rank of the value should match. Got "
                f"major_to_minor={self.major_to_minor} and shape={tuple(aval_shape)}")


class Format:
    """A layout and a sharding: what `jit`'s in/out shardings and `device_put` may take."""

    __slots__ = ("layout", "sharding")

    def __init__(self, layout=None, sharding=None):
        if isinstance(layout, Layout) and sharding is None:
            raise ValueError(
                f"Sharding has to be concrete when layout is of type {type(layout)}. Please "
                "pass a `jax.sharding.NamedSharding` or `jax.sharding.SingleDeviceSharding` "
                f"to the sharding argument. Got sharding {sharding}")
        if not isinstance(layout, (Layout, type(None), AutoLayoutSingleton)):
            raise TypeError(
                "Invalid value received for the layout argument. Expected values are `None`, "
                f"`Layout.AUTO` or an instance of `Layout`. Got {layout} of type {type(layout)}")
        if not isinstance(sharding, (Sharding, type(None))):
            raise TypeError(
                "Invalid value received for the sharding argument. Expected values are `None` "
                f"or an instance of `jax.Sharding`. Got {sharding} of type {type(sharding)}")
        self.layout = layout
        self.sharding = sharding

    def __repr__(self):
        return f"Format(layout={self.layout}, sharding={self.sharding})"

    def __hash__(self):
        return hash((self.layout, self.sharding))

    def __eq__(self, other):
        return (isinstance(other, Format) and self.layout == other.layout
                and self.sharding == other.sharding)


def default_layout(ndim: int) -> Layout:
    return Layout(tuple(range(ndim)), ())


def _is_default(layout: Layout) -> bool:
    return (layout.major_to_minor == tuple(range(len(layout.major_to_minor)))
            and not layout.tiling and not layout.sub_byte_element_size_in_bits)


def check_supported(layout, what: str) -> None:
    """Raise unless `layout` is one fluxion honours (None, AUTO or the default layout)."""
    if isinstance(layout, Layout) and not _is_default(layout):
        raise NotImplementedError(
            f"{what}: fluxion keeps arrays in the default row-major layout; {layout} is not "
            "supported (pass Layout.AUTO, None or the default layout)")


def strip_formats(shardings, what: str):
    """`shardings` (a pytree prefix given to jit or device_put) with each `Format` replaced by
    its sharding, after checking its layout is one fluxion honours."""
    def strip(s):
        if isinstance(s, Format):
            check_supported(s.layout, what)
            return s.sharding
        return s
    is_format = lambda s: isinstance(s, Format)  # noqa: E731
    if shardings is None or not any(map(is_format, tree_util.tree_leaves(shardings, is_format))):
        return shardings
    return tree_util.tree_map(strip, shardings, is_leaf=is_format)


def with_layout_constraint(x, layouts):
    """`x` (a pytree) with its leaves in `layouts` (a Layout, or a pytree prefix of them)."""
    leaves, tree = tree_util.tree_flatten(x)
    flat = tree_util.broadcast_prefix(
        layouts, x, lambda l: not isinstance(l, (list, tuple, dict)),
        lambda p, t: ValueError(f"with_layout_constraint layouts specification must be a tree "
                                f"prefix of the corresponding value, got {p!r}"))
    if any(not isinstance(l, Layout) for l in flat):
        raise ValueError("layouts passed to `with_layout_constraint` must be of type `Layout`. "
                         f"Got {[type(l) for l in flat]}")
    for leaf, l in zip(leaves, flat):
        l.check_compatible_aval(core.get_aval(leaf).shape)
        check_supported(l, "with_layout_constraint")
    return tree_util.tree_unflatten(tree, leaves)
