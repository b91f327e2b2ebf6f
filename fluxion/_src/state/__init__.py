"""Mutable references (`Ref`s): their type, the state primitives and the discharge pass."""
