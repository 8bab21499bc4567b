"""Shared post-condition for the atom tests: a layout equals a reference placement."""
from __future__ import annotations


def placement_from_reference(ref_items, shape):
    """``ref_items`` yields (owner_dict, (row, col)) pairs written from the PTX text. Returns
    {(row, col): owner_dict} after checking every element of ``shape`` appears exactly once."""
    rows, cols = shape
    want = {}
    for owner, (r, c) in ref_items:
        assert 0 <= r < rows and 0 <= c < cols, (owner, r, c)
        assert (r, c) not in want, f"reference places ({r}, {c}) twice: {want[(r, c)]} and {owner}"
        want[(r, c)] = owner
    assert len(want) == rows * cols, f"reference covers {len(want)} of {rows * cols} elements"
    return want


def assert_layout_matches(layout, want, shape):
    """Every element's owners (over every axis) are exactly the reference owner; unused axes read 0."""
    import numpy as np

    names, t = layout.owner_table()
    rows, cols = shape
    assert layout.size() == rows * cols
    assert t.shape[1] == 1, "the atom should not replicate elements"
    axes = sorted(set(names) | {a for o in want.values() for a in o})
    got = np.stack([t[:, 0, names.index(a)] if a in names else np.zeros(len(t), dtype=np.int64) for a in axes], axis=1)
    exp = np.array([[want[divmod(i, cols)].get(a, 0) for a in axes] for i in range(rows * cols)], dtype=np.int64)
    bad = np.nonzero((got != exp).any(axis=1))[0]
    if len(bad):
        i = int(bad[0])
        raise AssertionError(
            f"element {divmod(i, cols)}: layout gives {dict(zip(axes, got[i].tolist()))}, PTX gives {dict(zip(axes, exp[i].tolist()))}"
        )
    # The scalar path agrees with the table path.
    r, c = rows - 1, cols - 1
    assert layout.owners(r, c, shape=shape)[0] == {a: int(v) for a, v in zip(names, t[-1][0])}
