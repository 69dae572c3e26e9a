"""torch.nn.functional for the engine: torch's `F` namespace over one module per family of layers, each op's
Function (forward and backward side by side) in its family module:

activation (relu, gelu, softmax ...), conv, pooling, normalization, dropout, linear, loss, distance (distance
and margin losses), ctc, sparse (one_hot, embedding, embedding_bag), padding, resample (interpolate,
pixel_shuffle, unfold/fold), sampling (grid_sample, affine_grid), sequence (recurrent layers, attention).
The array kernels the Functions call come from engine/backend (NumPy/CuPy, or our CUDA kernels on a GPU)."""

from __future__ import annotations

from .activation import (  # noqa: F401
    celu,
    celu_,
    elu,
    elu_,
    gelu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    log_softmax,
    logsigmoid,
    mish,
    prelu,
    relu,
    relu6,
    relu_,
    rrelu,
    rrelu_,
    selu,
    selu_,
    sigmoid,
    silu,
    softmax,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
    threshold_,
)
from .conv import (  # noqa: F401
    _same_pads,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from .ctc import (  # noqa: F401
    ctc_loss,
)
from .distance import (  # noqa: F401
    cosine_embedding_loss,
    cosine_similarity,
    gaussian_nll_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    normalize,
    pairwise_distance,
    pdist,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from .dropout import (  # noqa: F401
    alpha_dropout,
    dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    feature_alpha_dropout,
    gumbel_softmax,
)
from .linear import (  # noqa: F401
    bilinear,
    linear,
)
from .loss import (  # noqa: F401
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .normalization import (  # noqa: F401
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    rms_norm,
)
from .padding import (  # noqa: F401
    pad,
)
from .pooling import (  # noqa: F401
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_pool3d,
    max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)
from .resample import (  # noqa: F401
    channel_shuffle,
    fold,
    interpolate,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)
from .sampling import (  # noqa: F401
    affine_grid,
    grid_sample,
)
from .sequence import (  # noqa: F401
    scaled_dot_product_attention,
)
from .sparse import (  # noqa: F401
    embedding,
    embedding_bag,
    one_hot,
)
