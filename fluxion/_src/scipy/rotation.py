"""`fluxion.scipy.spatial.transform`: 3-D rotations as unit quaternions, and Slerp.

A Rotation holds quaternions (x, y, z, w) in an array of shape (4,) or (N, 4); it is a
NamedTuple, hence a pytree, so rotations pass through jit, vmap and grad. The sequence
arguments of the Euler-angle methods are static strings.
"""
from __future__ import annotations

import math
import re
import typing

import fluxion.numpy as jnp


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalized(q):
    return q / _norm(q)[..., None]


def _compose(p, q):
    """The quaternion of applying q, then p (Hamilton product p * q)."""
    px, py, pz, pw = (p[..., i] for i in range(4))
    qx, qy, qz, qw = (q[..., i] for i in range(4))
    return jnp.stack([pw * qx + qw * px + (py * qz - pz * qy),
                      pw * qy + qw * py + (pz * qx - px * qz),
                      pw * qz + qw * pz + (px * qy - py * qx),
                      pw * qw - px * qx - py * qy - pz * qz], axis=-1)


def _axis_index(axis: str) -> int:
    if axis not in "xyz" or len(axis) != 1:
        raise ValueError(f"Expected axis to be from ['x', 'y', 'z'], got {axis}")
    return "xyz".index(axis)


def _parse_sequence(seq: str, lengths) -> tuple[list[int], bool]:
    """(axis indices, extrinsic) of an Euler sequence like 'xyz' or 'ZXZ'."""
    if len(seq) not in lengths:
        raise ValueError(f"Expected axis specification to be a non-empty string of upto 3 "
                         f"characters, got {seq}" if lengths != (3,) else
                         f"Expected 3 axes, got {seq}.")
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    extrinsic = re.match(r"^[xyz]{1,3}$", seq) is not None
    if not (intrinsic or extrinsic):
        raise ValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or "
                         f"['X', 'Y', 'Z'], got {seq}")
    if any(seq[i] == seq[i + 1] for i in range(len(seq) - 1)):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return [_axis_index(a) for a in seq.lower()], extrinsic


def _elementary(axis: int, angle):
    half = angle / 2.0
    parts = [jnp.zeros_like(angle)] * 3 + [jnp.cos(half)]
    parts[axis] = jnp.sin(half)
    return jnp.stack(parts, axis=-1)


class Rotation(typing.NamedTuple):
    """Rotations in 3 dimensions (scipy.spatial.transform.Rotation's API)."""

    quat: typing.Any

    @classmethod
    def from_quat(cls, quat):
        """From quaternions (x, y, z, w), normalized."""
        return cls(_normalized(jnp.asarray(quat)))

    @classmethod
    def from_matrix(cls, matrix):
        """From rotation matrices (..., 3, 3), by the best-conditioned of four formulas."""
        m = jnp.asarray(matrix)
        diag = jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], axis=-1)
        trace = jnp.sum(diag, axis=-1)
        choice = jnp.argmax(jnp.concatenate([diag, trace[..., None]], axis=-1), axis=-1)
        candidates = []
        for i in range(3):
            j, k = (i + 1) % 3, (i + 2) % 3
            q = [None] * 4
            q[i] = 1 - trace + 2 * m[..., i, i]
            q[j] = m[..., j, i] + m[..., i, j]
            q[k] = m[..., k, i] + m[..., i, k]
            q[3] = m[..., k, j] - m[..., j, k]
            candidates.append(jnp.stack(q, axis=-1))
        candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                     m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
        stacked = jnp.stack(candidates, axis=-2)  # (..., 4 candidates, 4)
        quat = jnp.take_along_axis(stacked, choice[..., None, None], axis=-2)[..., 0, :]
        return cls(_normalized(quat))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False):
        """From rotation vectors (axis times angle)."""
        rotvec = jnp.asarray(rotvec)
        if degrees:
            rotvec = jnp.deg2rad(rotvec)
        angle = _norm(rotvec)
        a2 = angle * angle
        small = 0.5 - a2 / 48 + a2 * a2 / 3840  # Taylor series of sin(a / 2) / a
        safe = jnp.where(angle <= 1e-3, 1.0, angle)
        scale = jnp.where(angle <= 1e-3, small, jnp.sin(safe / 2) / safe)
        return cls(jnp.concatenate([scale[..., None] * rotvec, jnp.cos(angle / 2)[..., None]],
                                   axis=-1))

    @classmethod
    def from_mrp(cls, mrp):
        """From modified Rodrigues parameters."""
        mrp = jnp.asarray(mrp)
        s = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
        return cls(jnp.concatenate([2 * mrp, 2 - s], axis=-1) / s)

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False):
        """From Euler angles: 'xyz'-style (extrinsic) or 'XYZ'-style (intrinsic) sequences of
        1 to 3 axes."""
        axes, extrinsic = _parse_sequence(seq, (1, 2, 3))
        angles = jnp.atleast_1d(jnp.asarray(angles))
        if degrees:
            angles = jnp.deg2rad(angles)
        quat = _elementary(axes[0], angles[..., 0])
        for n, axis in enumerate(axes[1:], 1):
            step = _elementary(axis, angles[..., n])
            quat = _compose(step, quat) if extrinsic else _compose(quat, step)
        return cls(quat)

    @classmethod
    def identity(cls, num: int | None = None, dtype=float):
        """The identity rotation (`num` is not supported, as in JAX)."""
        if num is not None:
            raise NotImplementedError("Rotation.identity(num) is not supported")
        return cls(jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype))

    @classmethod
    def concatenate(cls, rotations):
        """One Rotation holding all of `rotations`."""
        return cls(jnp.concatenate([jnp.atleast_2d(r.quat) for r in rotations]))

    @classmethod
    def random(cls, random_key, num: int | None = None):
        """Uniformly distributed rotations: normalized standard normal quaternions."""
        from fluxion import random
        shape = (4,) if num is None else (num, 4)
        return cls(_normalized(random.normal(random_key, shape)))

    # -- conversions
    def as_quat(self, canonical: bool = False, scalar_first: bool = False):
        """Quaternions (x, y, z, w), or (w, x, y, z) with scalar_first; `canonical` picks the
        one of q, -q whose first nonzero of (w, x, y, z) is positive."""
        q = self.quat
        if canonical:
            zero, neg = q == 0, q < 0
            flip = (neg[..., 3] | (zero[..., 3] & neg[..., 0])
                    | (zero[..., 3] & zero[..., 0] & neg[..., 1])
                    | (zero[..., 3] & zero[..., 0] & zero[..., 1] & neg[..., 2]))
            q = jnp.where(flip[..., None], -q, q)
        return jnp.roll(q, 1, axis=-1) if scalar_first else q

    def as_matrix(self):
        """Rotation matrices (..., 3, 3)."""
        x, y, z, w = (self.quat[..., i] for i in range(4))
        x2, y2, z2, w2 = x * x, y * y, z * z, w * w
        rows = [[x2 - y2 - z2 + w2, 2 * (x * y - z * w), 2 * (x * z + y * w)],
                [2 * (x * y + z * w), -x2 + y2 - z2 + w2, 2 * (y * z - x * w)],
                [2 * (x * z - y * w), 2 * (y * z + x * w), -x2 - y2 + z2 + w2]]
        return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)

    def as_rotvec(self, degrees: bool = False):
        """Rotation vectors, angles in [0, pi]."""
        q = jnp.where(self.quat[..., 3:] < 0, -self.quat, self.quat)
        angle = 2.0 * jnp.arctan2(_norm(q[..., :3]), q[..., 3])
        a2 = angle * angle
        small = 2 + a2 / 12 + 7 * a2 * a2 / 2880  # Taylor series of a / sin(a / 2)
        safe = jnp.where(angle <= 1e-3, 1.0, angle)
        scale = jnp.where(angle <= 1e-3, small, safe / jnp.sin(safe / 2))
        if degrees:
            scale = jnp.rad2deg(scale)
        return scale[..., None] * q[..., :3]

    def as_mrp(self):
        """Modified Rodrigues parameters (the shorter of the two)."""
        sign = jnp.where(self.quat[..., 3:] < 0, -1.0, 1.0)
        return sign * self.quat[..., :3] / (1.0 + sign * self.quat[..., 3:])

    def as_euler(self, seq: str, degrees: bool = False):
        """Euler angles for a 3-axis sequence, by Bernardes and Viollet's quaternion method
        (2022); the middle angle is in [0, pi] (symmetric sequences) or [-pi/2, pi/2]."""
        axes, extrinsic = _parse_sequence(seq, (3,))
        if not extrinsic:
            axes = axes[::-1]
        i, j, k = axes
        symmetric = i == k
        if symmetric:
            k = 3 - i - j
        sign = (i - j) * (j - k) * (k - i) // 2
        q = self.quat
        if symmetric:
            a, b, c, d = q[..., 3], q[..., i], q[..., j], q[..., k] * sign
        else:
            a, b = q[..., 3] - q[..., j], q[..., i] + q[..., k] * sign
            c, d = q[..., j] + q[..., 3], q[..., k] * sign - q[..., i]
        middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
        eps = 1e-7
        at_zero = jnp.abs(middle) <= eps
        at_pi = jnp.abs(middle - math.pi) <= eps
        half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
        first_index, third_index = (0, 2) if extrinsic else (2, 0)
        generic = ~(at_zero | at_pi)
        # In the degenerate cases the third angle is 0 and the first carries the rotation.
        degenerate = jnp.where(at_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
        first = jnp.where(generic, half_sum - half_diff, 0.0)
        third = jnp.where(generic, half_sum + half_diff, 0.0)
        angles = [None] * 3
        angles[first_index], angles[third_index] = first, third
        angles[0] = jnp.where(generic, angles[0], degenerate)
        if not symmetric:
            angles[third_index] = angles[third_index] * sign
            middle = middle - math.pi / 2
        angles[1] = middle
        out = (jnp.stack(angles, axis=-1) + math.pi) % (2 * math.pi) - math.pi
        return jnp.rad2deg(out) if degrees else out

    # -- operations
    def apply(self, vectors, inverse: bool = False):
        """The rotated vectors (the inverse rotation with `inverse`)."""
        m = self.as_matrix()
        if inverse:
            m = jnp.swapaxes(m, -1, -2)
        return jnp.einsum("...ij,...j->...i", m, jnp.asarray(vectors))

    def inv(self):
        """The inverse rotation."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self):
        """Rotation angles in [0, pi]."""
        return 2.0 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The (weighted) mean rotation: the top eigenvector of sum_i w_i q_i q_i^T."""
        q = self.quat
        w = (jnp.ones(q.shape[0], dtype=q.dtype) if weights is None
             else jnp.asarray(weights, dtype=q.dtype))
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != len(self):
            raise ValueError("Expected `weights` to have number of values equal to number of "
                             f"rotations, got {w.shape[0]} values and {len(self)} rotations.")
        k = jnp.dot(w[None, :] * q.T, q)
        return Rotation(jnp.linalg.eigh(k)[1][:, -1])

    def __mul__(self, other):
        return Rotation.from_quat(_compose(self.quat, other.quat))

    @property
    def single(self) -> bool:
        return self.quat.ndim == 1

    def __getitem__(self, index):
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[index])

    def __len__(self):
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation between key rotations at increasing times."""

    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations: Rotation):
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError(f"Expected times to be specified in a 1 dimensional array, got "
                             f"{times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError(f"Expected number of rotations to be equal to number of "
                             f"timestamps given, got {len(rotations)} rotations and "
                             f"{times.shape[0]} timestamps.")
        steps = (rotations[:-1].inv() * rotations[1:]).as_rotvec()
        return cls(times, times[1:] - times[:-1], rotations, steps)

    def __call__(self, times):
        t = jnp.asarray(times, dtype=self.times.dtype)
        if t.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = t.ndim == 0
        t = jnp.atleast_1d(t)
        # The key interval of each time: searchsorted(times, t) - 1, at least 0.
        index = jnp.maximum(jnp.sum(self.times[None, :] < t[:, None], axis=1) - 1, 0)
        alpha = (t - self.times[index]) / self.timedelta[index]
        out = self.rotations[index] * Rotation.from_rotvec(self.rotvecs[index] * alpha[:, None])
        return out[0] if single else out
