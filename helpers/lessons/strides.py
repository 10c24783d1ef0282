"""Storage, shape and stride, drawn and tabulated (notebook 01)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import torch

# storage, shape and stride


def _check_views(views: Any) -> dict[str, torch.Tensor]:
    if not isinstance(views, Mapping) or not views:
        raise TypeError("views must be a non-empty dict {name: tensor}, e.g. {'x': x, 'x.t()': x.t()}")
    for name, t in views.items():
        if not isinstance(name, str):
            raise TypeError(f"view names must be strings, got {name!r}")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} is a {type(t).__name__}, not a tensor")
    return dict(views)


def _storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def layout_table(views: Mapping[str, torch.Tensor]) -> pd.DataFrame:
    """Used by notebook 01: shape, stride, offset, contiguity and storage of each tensor, against the first one."""
    items = _check_views(views)
    first = next(iter(items.values()))
    rows = []
    for name, t in items.items():
        rows.append(
            {
                "name": name,
                "shape": tuple(t.shape),
                "stride": tuple(t.stride()),
                "storage_offset": t.storage_offset(),
                "is_contiguous": t.is_contiguous(),
                "storage_elements": t.untyped_storage().nbytes() // t.element_size(),
                "shares_storage_with_first": _storage_ptr(t) == _storage_ptr(first),
            }
        )
    return pd.DataFrame(rows)


def storage_index(t: torch.Tensor) -> torch.Tensor:
    """Used by notebook 01: for each element of `t`, the storage index it reads (offset + sum(i_d * stride_d))."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    index = torch.zeros(t.shape, dtype=torch.long)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[dim] = size
        index = index + torch.arange(size).reshape(shape) * stride
    return index + t.storage_offset()


def strides_figure(views: Mapping[str, torch.Tensor], max_elements: int = 64):
    """Used by notebook 01: one buffer (top strip) and each view of it (1-D or 2-D) as a grid of the indices it
    reads, coloured by storage index."""
    import matplotlib.pyplot as plt
    from matplotlib import colormaps

    items = _check_views(views)
    first = next(iter(items.values()))
    n_storage = first.untyped_storage().nbytes() // first.element_size()
    if n_storage > max_elements:
        raise ValueError(
            f"the buffer holds {n_storage} elements; draw at most {max_elements} "
            "(use a small tensor, e.g. torch.arange(12).reshape(3, 4))"
        )
    for name, t in items.items():
        if _storage_ptr(t) != _storage_ptr(first):
            raise ValueError(
                f"{name} does not share the first tensor's storage: it is a copy, not a view "
                "(draw it separately, or compare with layout_table)"
            )
        if t.dim() not in (1, 2):
            raise ValueError(f"{name} has {t.dim()} dimensions; strides_figure draws 1-D and 2-D tensors")
    cmap = colormaps["viridis"]

    def color(i: int):
        return cmap(0.15 + 0.8 * i / max(n_storage - 1, 1))

    grids = [(name, storage_index(t)) for name, t in items.items()]
    grids = [(name, idx.reshape(1, -1) if idx.dim() == 1 else idx) for name, idx in grids]
    heights = [1.2] + [max(idx.shape[0], 1) * 0.55 + 0.9 for _, idx in grids]
    width = max([n_storage * 0.45] + [idx.shape[1] * 0.55 + 0.5 for _, idx in grids] + [5.0])
    fig, axes = plt.subplots(
        len(grids) + 1, 1, figsize=(min(width, 14), sum(heights)), gridspec_kw={"height_ratios": heights}
    )
    ax = axes[0]
    for i in range(n_storage):
        ax.add_patch(plt.Rectangle((i, 0), 0.95, 0.95, color=color(i)))
        ax.text(i + 0.47, 0.47, str(i), ha="center", va="center", color="white", fontsize=9)
    ax.set_xlim(-0.1, n_storage)
    ax.set_ylim(-0.1, 1.0)
    ax.set_title(f"storage: one buffer of {n_storage} elements, in memory order", fontsize=10, loc="left")
    ax.axis("off")
    for ax, (name, idx) in zip(axes[1:], grids):
        t = items[name]
        r, c = idx.shape
        for i in range(r):
            for j in range(c):
                k = int(idx[i, j])
                ax.add_patch(plt.Rectangle((j, r - 1 - i), 0.95, 0.95, color=color(k)))
                ax.text(j + 0.47, r - 1 - i + 0.47, str(k), ha="center", va="center", color="white", fontsize=9)
        ax.set_xlim(-0.1, max(c, 1))
        ax.set_ylim(-0.1, r)
        ax.set_aspect("equal")
        ax.set_anchor("W")
        ax.set_title(
            f"{name}: shape {tuple(t.shape)}, stride {tuple(t.stride())}, offset {t.storage_offset()}"
            f"{'' if t.is_contiguous() else '  (not contiguous)'}",
            fontsize=10,
            loc="left",
        )
        ax.axis("off")
    fig.suptitle("Each cell shows the storage index it reads", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    plt.close(fig)  # the notebook displays the returned figure once, not twice
    return fig
