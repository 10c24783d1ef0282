"""What ATen operators do, by class: one table to read host ops (CPU traces) and Inductor kernel names.
``wrapper`` ops (``linear``, ``matmul``, ``to``) compute nothing themselves: their children are the work."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

# class -> bare op names. In-place forms lose their trailing "_" (``mul_`` is ``mul``) except for names
# starting with "_", which keep it (``_index_put_impl_``).
OP_CLASSES: dict[str, frozenset[str]] = {
    "gemm": frozenset(
        """
        mm addmm bmm baddbmm addbmm addmv mv dot vdot _int_mm _scaled_mm _grouped_mm _scaled_grouped_mm
        _addmm_activation _mkl_linear _linear_pointwise mkldnn_linear
        """.split()
    ),
    "attention": frozenset(
        """
        scaled_dot_product_attention _scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention
        _scaled_dot_product_cudnn_attention _scaled_dot_product_flash_attention_for_cpu _flash_attention_forward
        _efficient_attention_forward _scaled_dot_product_attention_math _flash_attention_backward
        _efficient_attention_backward _scaled_dot_product_flash_attention_backward
        _scaled_dot_product_efficient_attention_backward _scaled_dot_product_cudnn_attention_backward
        flex_attention flex_attention_backward
        """.split()
    ),
    "convolution": frozenset(
        """
        convolution _convolution conv1d conv2d conv3d cudnn_convolution mkldnn_convolution convolution_backward
        conv_transpose2d cudnn_convolution_transpose _slow_conv2d_forward miopen_convolution
        """.split()
    ),
    "normalization": frozenset(
        """
        native_layer_norm layer_norm rms_norm _fused_rms_norm native_group_norm group_norm native_batch_norm
        batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training cudnn_batch_norm
        native_layer_norm_backward native_batch_norm_backward cudnn_batch_norm_backward _fused_rms_norm_backward
        """.split()
    ),
    "reduction": frozenset(
        """
        sum mean amax amin max min var std var_mean prod argmax argmin any all norm linalg_vector_norm logsumexp
        cumsum cumprod nll_loss_forward nll_loss_backward topk argsort bincount histc nonzero _unique2
        unique_dim searchsorted cummax cummin sort
        """.split()
    ),
    "softmax": frozenset(
        """
        _softmax softmax _log_softmax log_softmax _softmax_backward_data _log_softmax_backward_data
        _masked_softmax
        """.split()
    ),
    "elementwise": frozenset(
        """
        add sub rsub mul div gelu relu silu sigmoid tanh exp log neg pow sqrt rsqrt reciprocal where clamp
        clamp_min clamp_max abs maximum minimum erf sin cos masked_fill fill zero threshold hardtanh leaky_relu
        elu softplus addcmul addcdiv lerp gelu_backward threshold_backward sigmoid_backward tanh_backward
        silu_backward full zeros ones embedding index scatter gather scatter_add scatter_reduce index_add
        index_put _index_put_impl _index_put_impl_ index_copy index_fill masked_scatter floor_divide remainder
        fmod floor ceil round trunc sign eq ne lt le gt ge logical_and logical_or logical_not bitwise_and
        bitwise_or bitwise_not one_hot dropout native_dropout bernoulli arange _foreach_add _foreach_mul
        _foreach_div _foreach_lerp _foreach_sqrt _foreach_addcmul _foreach_addcdiv _fused_adamw _fused_adam
        """.split()
    ),
    "copy": frozenset(
        """
        copy _to_copy clone _copy_from _copy_from_and_resize cat convert_element_type index_select repeat
        repeat_interleave roll flip constant_pad_nd masked_select stack
        """.split()
    ),
    "view": frozenset(
        """
        as_strided view _unsafe_view reshape _reshape_alias t transpose expand expand_as permute squeeze
        unsqueeze select slice alias detach unbind split split_with_sizes chunk narrow resolve_conj resolve_neg
        view_as flatten unflatten numpy_T diagonal lift_fresh empty empty_strided empty_like resize set
        result_type broadcast_tensors _has_compatible_shallow_copy_type is_same_size size stride dim
        is_contiguous item _local_scalar_dense
        """.split()
    ),
    "wrapper": frozenset("to contiguous type_as linear matmul einsum dropout_wrapper".split()),
}
_CLASS_OF: dict[str, str] = {op: cls for cls, ops in OP_CLASSES.items() for op in ops}
# Classes that do no computation of their own: an op of these is not a unit of work.
NO_COMPUTE_CLASSES = frozenset({"view", "wrapper"})


def op_base(name: str) -> str | None:
    """``'aten::mul_'`` -> ``'mul'``, ``'aten::add.Tensor'`` -> ``'add'``; None for names without a namespace."""
    if "::" not in name:
        return None
    base = name.split("::", 1)[1].split(".", 1)[0]
    return base[:-1] if base.endswith("_") and not base.startswith("_") else base


def op_class(op: str) -> str | None:
    """The class of a bare ATen op name (``'mm'`` -> ``'gemm'``, ``'view'`` -> ``'view'``); None when not listed."""
    base = op[:-1] if op.endswith("_") and not op.startswith("_") and op[:-1] in _CLASS_OF else op
    return _CLASS_OF.get(base)


def aten_family(name: str) -> str:
    """The family of a dispatcher op name (``'aten::mm'`` -> ``'gemm'``); ``'unknown'`` when not listed or not work."""
    base = op_base(name)
    cls = op_class(base) if base else None
    return cls if cls is not None and cls not in NO_COMPUTE_CLASSES else "unknown"


def computes(name: str) -> bool:
    """True for a dispatcher op (``ns::op``) that may do work itself: not a view, metadata or wrapper."""
    base = op_base(name)
    return base is not None and op_class(base) not in NO_COMPUTE_CLASSES


@lru_cache(maxsize=1)
def op_vocabulary() -> frozenset[str]:
    """Every registered ATen and prims op name (what Inductor puts in kernel names), read from
    ``aten_op_names.txt`` so that reading a trace needs no torch."""
    path = Path(__file__).with_name("aten_op_names.txt")
    names = {
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    return frozenset(names | set(_CLASS_OF))
