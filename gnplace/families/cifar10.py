r"""The cifar10 family: random CNNs from the ENAS search spaces (Pham et al., 2018), as plain modules.

`Efficient Neural Architecture Search via Parameter Sharing <https://arxiv.org/abs/1802.03268>`_
searched two spaces on CIFAR-10; Placeto (Addanki et al., 2019) placed the training graphs of
architectures drawn from them. The facts below are those of ``docs/families.md``.

Micro space (ENAS section 2.3, the default): a network of ``L + 2`` cells. A cell reads the outputs
of the two previous cells and has ``B = 5`` blocks; block ``j`` picks two inputs among the two cell
inputs and blocks ``0..j-1`` and one op for each among :data:`MICRO_OPS`, and adds the two results.
The cell output concatenates the blocks that no later block consumed. Normal and reduction cells
have their own architectures; a reduction cell runs the ops that read a cell input at stride 2
(identity at stride 2 becomes a factorized reduction) and the network doubles its channels there.

.. math::
    s_{j+2} = \mathrm{op}_x(s_{x_j}) + \mathrm{op}_y(s_{y_j}), \qquad
    \mathrm{out} = \mathrm{concat}\{s_i : i \geq 2, i \text{ not consumed}\}

Macro space (ENAS section 2.4, ``space="macro"``): ``L`` layers, each one op of :data:`MACRO_OPS` on
the previous layer, concatenated with the outputs of earlier layers it skips to (each with
probability about 0.4), then projected back to the layer width by ReLU, 1x1 conv and BatchNorm.

Both spaces share the stem (3x3 conv + BatchNorm), the head (ReLU, global average pool, dropout,
linear to 10 classes) and the loss (softmax cross-entropy); inputs are 32x32 RGB images. Modules
are returned in training mode (BatchNorm uses batch statistics), as in a training step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnplace.families._common import (
    MAX_GRAPH_OPS,
    MAX_PARAM_BYTES,
    SizeEstimate,
    check_choice,
    check_int,
    check_probability,
    check_size,
    log_uniform_int,
    seeded_float32,
)
from gnplace.seed import SeedLike, as_generator

__all__ = [
    "MICRO_OPS", "MACRO_OPS", "SPACES", "MicroArch", "MacroArch", "sample_micro_arch", "sample_macro_arch",
    "SepConv", "FactorizedReduction", "ReLUConvBN", "Cell", "MicroNet", "MacroLayer", "MacroNet",
    "sample", "random_knobs", "estimate_size", "MAX_GRAPH_OPS", "MAX_PARAM_BYTES",
    "MAX_LAYERS", "MAX_MACRO_LAYERS", "MAX_CHANNELS", "MAX_BATCH", "MAX_NUM_BLOCKS",
]

#: ENAS micro ops, in the order of the ENAS code's op ids 0..4.
MICRO_OPS: tuple[str, ...] = ("sep_conv_3x3", "sep_conv_5x5", "avg_pool_3x3", "max_pool_3x3", "identity")
#: ENAS macro ops, in the order of the ENAS code's op ids 0..5.
MACRO_OPS: tuple[str, ...] = ("conv_3x3", "conv_5x5", "sep_conv_3x3", "sep_conv_5x5", "avg_pool_3x3", "max_pool_3x3")
#: The search spaces :func:`sample` knows.
SPACES: tuple[str, ...] = ("micro", "macro")
#: CIFAR-10 classes and image side (pixels).
NUM_CLASSES = 10
IMAGE_SIZE = 32

# Caps of the size knobs: a value past one is a typo or a script's overflow, which ran until killed (layers=10**30
# built its list of cells) or failed deep in torch with a traceback. Each is far above every real use.
#: Most micro ``layers`` (``L + 2`` cells, about 119 ops each): 12 times the 840 of the benches' 100,000-op graph.
MAX_LAYERS = 10_000
#: Most macro ``layers``: a macro layer reads about 0.4 of the layers before it, so ops grow with ``L**2``
#: (ENAS searched 12..24 layers; :func:`random_knobs` draws 4..24).
MAX_MACRO_LAYERS = 500
#: Most ``channels`` (``C``; the micro net widens to ``4 C``): ENAS's widest nets had 96.
MAX_CHANNELS = 1024
#: Most images in a batch (ENAS: 144 to 160; 65,536 images are 0.8 GB of float32).
MAX_BATCH = 65_536
#: Most micro blocks per cell (``B``; ENAS and NASNet: 5).
MAX_NUM_BLOCKS = 64

# Ops of the imported training graph (forward, backward, updates) per piece of the heaviest architecture, counted on
# built graphs (tests/families/test_cifar10.py checks the bound against them): every micro op a 5x5 separable
# convolution reading a cell input (so every cell input is calibrated and every block output concatenated), every
# macro op a 5x5 separable convolution reading every earlier layer, every earlier output reduced at a pool layer.
#: Ops outside the cells or layers: input, stem, head, loss.
_FIXED_OPS = 40
#: Ops of a micro cell besides its blocks (input calibration, concatenation; a factorized reduction is the largest).
_MICRO_CELL_OPS = 30
#: Ops of a micro block of two separable convolutions and their sum (measured: 54).
_MICRO_BLOCK_OPS = 56
#: Ops of the first macro layer (its branch alone; measured with the fixed ones: 50).
_MACRO_FIRST_LAYER_OPS = 12
#: Ops of a macro layer after the first (branch, concatenation, projection; measured: 31).
_MACRO_LAYER_OPS = 32
#: Ops of a factorized reduction of a macro layer's output (measured: 20).
_MACRO_REDUCTION_OPS = 20

#: A micro block: (x input id, x op id, y input id, y op id); ids 0 and 1 are the cell inputs.
Block = tuple[int, int, int, int]


# --------------------------------------------------------------------------------------------------
# Architectures (what the ENAS controller samples)


@dataclass(frozen=True)
class MicroArch:
    """A micro-space architecture: the blocks of the normal cell and of the reduction cell.

    Attributes:
        normal (tuple[Block, ...]): ``(x_id, x_op, y_id, y_op)`` per block of the normal cell;
            block ``j`` reads ids in ``[0, j + 2)`` and op ids index :data:`MICRO_OPS`.
        reduce (tuple[Block, ...]): the same for the reduction cell.
    """

    normal: tuple[Block, ...]
    reduce: tuple[Block, ...]


@dataclass(frozen=True)
class MacroArch:
    """A macro-space architecture.

    Attributes:
        ops (tuple[int, ...]): op id (into :data:`MACRO_OPS`) of each layer.
        skips (tuple[tuple[int, ...], ...]): for layer ``i``, the earlier layers ``j < i`` whose
            outputs it concatenates with its own op's output.
    """

    ops: tuple[int, ...]
    skips: tuple[tuple[int, ...], ...]


def sample_micro_arch(rng: np.random.Generator, num_blocks: int = 5) -> MicroArch:
    """Draw a micro architecture uniformly, as the untrained ENAS controller would.

    Args:
        rng (numpy.random.Generator): the generator (``8 * num_blocks`` draws).
        num_blocks (int, optional): blocks per cell, ``B``. (default: :obj:`5`)

    Returns:
        MicroArch: the normal and reduction cells.

    Examples:
        >>> arch = sample_micro_arch(np.random.default_rng(0))
        >>> len(arch.normal), len(arch.reduce)
        (5, 5)
    """

    def cell() -> tuple[Block, ...]:
        blocks: list[Block] = []
        for j in range(num_blocks):
            x_id, y_id = (int(i) for i in rng.integers(0, j + 2, size=2))
            x_op, y_op = (int(o) for o in rng.integers(0, len(MICRO_OPS), size=2))
            blocks.append((x_id, x_op, y_id, y_op))
        return tuple(blocks)

    normal = cell()
    return MicroArch(normal=normal, reduce=cell())


def sample_macro_arch(rng: np.random.Generator, num_layers: int, skip_prob: float = 0.4) -> MacroArch:
    """Draw a macro architecture: a uniform op per layer, each skip connection with ``skip_prob``.

    Args:
        rng (numpy.random.Generator): the generator.
        num_layers (int): layers, ``L``.
        skip_prob (float, optional): probability of each skip connection to an earlier layer
            (ENAS steers its controller towards 0.4). (default: :obj:`0.4`)

    Returns:
        MacroArch: ops and skips.

    Examples:
        >>> arch = sample_macro_arch(np.random.default_rng(0), 4)
        >>> len(arch.ops), arch.skips[0]
        (4, ())
    """
    ops = tuple(int(o) for o in rng.integers(0, len(MACRO_OPS), size=num_layers))
    skips = tuple(tuple(int(j) for j in np.flatnonzero(rng.random(i) < skip_prob)) for i in range(num_layers))
    return MacroArch(ops=ops, skips=skips)


# --------------------------------------------------------------------------------------------------
# Building blocks


class ReLUConvBN(nn.Module):
    """ReLU, ``k x k`` convolution without bias, BatchNorm (ENAS uses it to match channel counts).

    Args:
        c_in (int): input channels.
        c_out (int): output channels.
        kernel_size (int, optional): convolution side (pixels). (default: :obj:`1`)
    """

    def __init__(self, c_in: int, c_out: int, kernel_size: int = 1) -> None:
        super().__init__()
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size, padding=kernel_size // 2, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x: Tensor) -> Tensor:
        """``[N, c_in, H, W] -> [N, c_out, H, W]``."""
        return self.bn(self.conv(self.relu(x)))


class SepConv(nn.Module):
    """ENAS separable convolution: two times [ReLU, depthwise ``k x k``, pointwise 1x1, BatchNorm].

    Only the first depthwise convolution has the stride.

    Args:
        channels (int): input and output channels.
        kernel_size (int): depthwise side (pixels), 3 or 5.
        stride (int, optional): stride of the first depthwise convolution. (default: :obj:`1`)
    """

    def __init__(self, channels: int, kernel_size: int, stride: int = 1) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for rep in range(2):
            layers += [
                nn.ReLU(),
                nn.Conv2d(channels, channels, kernel_size, stride=stride if rep == 0 else 1,
                          padding=kernel_size // 2, groups=channels, bias=False),
                nn.Conv2d(channels, channels, 1, bias=False),
                nn.BatchNorm2d(channels),
            ]
        self.op = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """``[N, C, H, W] -> [N, C, H / stride, W / stride]``."""
        return self.op(x)


class FactorizedReduction(nn.Module):
    """ENAS factorized reduction: halve the resolution without losing every other pixel.

    Two paths of 1x1 average pooling at stride 2 and a 1x1 convolution, the second shifted by one
    pixel (pad bottom-right, drop the first row and column), concatenated, then BatchNorm.

    Args:
        c_in (int): input channels.
        c_out (int): output channels (the paths get ``c_out // 2`` and the rest).
        relu (bool, optional): apply ReLU first (as when calibrating a cell input). (default: :obj:`False`)
    """

    def __init__(self, c_in: int, c_out: int, relu: bool = False) -> None:
        super().__init__()
        self.relu = nn.ReLU() if relu else nn.Identity()
        self.path1 = nn.Conv2d(c_in, c_out // 2, 1, bias=False)
        self.path2 = nn.Conv2d(c_in, c_out - c_out // 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x: Tensor) -> Tensor:
        """``[N, c_in, H, W] -> [N, c_out, H / 2, W / 2]`` (H and W even)."""
        x = self.relu(x)
        p1 = self.path1(F.avg_pool2d(x, 1, 2))
        shifted = F.pad(x, (0, 1, 0, 1))[:, :, 1:, 1:]
        p2 = self.path2(F.avg_pool2d(shifted, 1, 2))
        return self.bn(torch.cat([p1, p2], dim=1))


def _cell_reads(blocks: tuple[Block, ...]) -> tuple[bool, bool]:
    """Whether any block of a cell reads cell input 0 (cell ``i - 2``) and input 1 (cell ``i - 1``)."""
    ids = {i for b in blocks for i in (b[0], b[2])}
    return 0 in ids, 1 in ids


def _micro_op(op: int, channels: int, stride: int) -> nn.Module:
    """The module of micro op id ``op`` on ``channels`` channels at ``stride``."""
    name = MICRO_OPS[op]
    if name == "sep_conv_3x3":
        return SepConv(channels, 3, stride)
    if name == "sep_conv_5x5":
        return SepConv(channels, 5, stride)
    if name == "avg_pool_3x3":
        # TensorFlow's SAME average pooling divides by the number of valid pixels.
        return nn.AvgPool2d(3, stride, padding=1, count_include_pad=False)
    if name == "max_pool_3x3":
        return nn.MaxPool2d(3, stride, padding=1)
    return nn.Identity() if stride == 1 else FactorizedReduction(channels, channels)


class Head(nn.Module):
    """ReLU, global average pool, dropout, linear to the class logits.

    Args:
        channels (int): input channels.
        num_classes (int): logits.
        dropout (float): drop probability.
    """

    def __init__(self, channels: int, num_classes: int, dropout: float) -> None:
        super().__init__()
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(channels, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """``[N, C, H, W] -> [N, num_classes]``."""
        return self.linear(self.dropout(self.relu(x).mean(dim=(2, 3))))


# --------------------------------------------------------------------------------------------------
# Micro space


class Cell(nn.Module):
    """One ENAS micro cell (normal or reduction) with a fixed architecture.

    The two inputs are first calibrated to ``c_out`` channels and the same resolution: the older
    one goes through a factorized reduction when the newer one has half its resolution, and an
    input with another channel count through ReLU-1x1 conv-BN (ENAS ``_maybe_calibrate_size``).

    Args:
        blocks (tuple[Block, ...]): the cell architecture.
        c_pp (int): channels of the older input (output of cell ``i - 2``).
        c_p (int): channels of the newer input (output of cell ``i - 1``).
        c_out (int): channels of every block.
        reduce_pp (bool): whether the older input has twice the resolution of the newer one.
        reduction (bool): a reduction cell (ops reading a cell input use stride 2).

    Attributes:
        out_channels (int): channels of the output, ``c_out`` times the unconsumed blocks.
    """

    def __init__(self, blocks: tuple[Block, ...], c_pp: int, c_p: int, c_out: int, reduce_pp: bool,
                 reduction: bool) -> None:
        super().__init__()
        self.blocks = blocks
        self.reduction = reduction
        read = _cell_reads(blocks)
        # An input that no block reads is not calibrated (its parameters would get no gradient).
        self.pre0: nn.Module | None = None
        if read[0]:
            if reduce_pp:
                self.pre0 = FactorizedReduction(c_pp, c_out, relu=True)
            else:
                self.pre0 = ReLUConvBN(c_pp, c_out) if c_pp != c_out else nn.Identity()
        self.pre1: nn.Module | None = None
        if read[1]:
            self.pre1 = ReLUConvBN(c_p, c_out) if c_p != c_out else nn.Identity()
        self.ops = nn.ModuleList()
        for x_id, x_op, y_id, y_op in blocks:
            for src, op in ((x_id, x_op), (y_id, y_op)):
                self.ops.append(_micro_op(op, c_out, 2 if reduction and src < 2 else 1))
        consumed = {i for b in blocks for i in (b[0], b[2])}
        self.concat = tuple(j + 2 for j in range(len(blocks)) if j + 2 not in consumed)
        self.out_channels = c_out * len(self.concat)

    def forward(self, s0: Tensor | None, s1: Tensor | None) -> Tensor:
        """Outputs of cells ``i - 2`` and ``i - 1`` (``None`` where not read) to the output of this cell."""
        states = [
            self.pre0(s0) if self.pre0 is not None and s0 is not None else None,
            self.pre1(s1) if self.pre1 is not None and s1 is not None else None,
        ]
        for j, (x_id, _, y_id, _) in enumerate(self.blocks):
            x, y = states[x_id], states[y_id]
            assert x is not None and y is not None
            states.append(self.ops[2 * j](x) + self.ops[2 * j + 1](y))
        outs = [states[i] for i in self.concat]
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)  # type: ignore[arg-type,return-value]

    def extra_repr(self) -> str:
        """Kind of cell and its blocks."""
        return f"reduction={self.reduction}, blocks={self.blocks}"


class MicroNet(nn.Module):
    """An ENAS micro-space network with loss: ``forward(images, labels)`` is the mean cross-entropy.

    Stem 3x3 conv to ``3 C`` channels + BatchNorm; ``L + 2`` cells with reductions at positions
    ``L // 3`` and ``2 (L // 3) + 1``, channels ``C`` doubling at each; head and loss.

    Args:
        arch (MicroArch): the cells.
        layers (int): ``L``.
        channels (int): ``C``, the block width of the first cells.
        dropout (float, optional): drop probability before the linear head. (default: :obj:`0.1`)
        num_classes (int, optional): classes. (default: :obj:`10`)
    """

    def __init__(self, arch: MicroArch, layers: int, channels: int, dropout: float = 0.1,
                 num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.arch = arch
        self.stem = nn.Sequential(nn.Conv2d(3, 3 * channels, 3, padding=1, bias=False), nn.BatchNorm2d(3 * channels))
        num_cells = layers + 2
        reductions = {layers // 3, 2 * (layers // 3) + 1}
        kinds = [arch.reduce if i in reductions else arch.normal for i in range(num_cells)]
        # A cell whose output no later live cell reads is dead code (TensorFlow prunes it from
        # the training graph); it is left out so that every parameter gets a gradient.
        live = [False] * (num_cells - 1) + [True]
        for i in reversed(range(num_cells)):
            if live[i]:
                read = _cell_reads(kinds[i])
                for offset, used in ((2, read[0]), (1, read[1])):
                    if used and i - offset >= 0:
                        live[i - offset] = True
        self.live = tuple(live)
        c, c_pp, c_p, reduce_pp = channels, 3 * channels, 3 * channels, False
        self.cells = nn.ModuleDict()  # position -> cell, live cells only
        for i in range(num_cells):
            reduction = i in reductions
            if reduction:
                c *= 2
            cell = Cell(kinds[i], c_pp, c_p, c, reduce_pp, reduction)
            if live[i]:
                self.cells[str(i)] = cell
            c_pp, c_p, reduce_pp = c_p, cell.out_channels, reduction
        self.head = Head(c_p, num_classes, dropout)

    def forward(self, images: Tensor, labels: Tensor) -> Tensor:
        """Images ``[N, 3, 32, 32]`` (float) and labels ``[N]`` (int64) to the scalar loss."""
        stem = self.stem(images)
        s0: Tensor | None = stem
        s1: Tensor | None = stem
        for i in range(len(self.live)):
            out = self.cells[str(i)](s0, s1) if self.live[i] else None
            s0, s1 = s1, out
        assert s1 is not None
        logits = self.head(s1)
        # on the logits' device, as transformers' losses move them: accelerate's root hook puts inputs on its main GPU
        return F.cross_entropy(logits, labels.to(logits.device))


# --------------------------------------------------------------------------------------------------
# Macro space


class MacroLayer(nn.Module):
    """One ENAS macro layer: an op on the previous layer, then the skip concatenation.

    Convolution branches are 1x1 conv-BN-ReLU then ``k x k`` conv (or separable conv)-BN-ReLU;
    pooling branches 1x1 conv-BN-ReLU then 3x3 pooling (ENAS ``_conv_branch``, ``_pool_branch``).
    A layer with an index above 0 concatenates the outputs of the layers it skips to with its own
    and goes through ReLU, 1x1 conv back to ``channels`` and BatchNorm.

    Args:
        op (int): op id into :data:`MACRO_OPS`.
        skips (tuple[int, ...]): the earlier layers read.
        channels (int): width of the layer.
        index (int): position of the layer.
    """

    def __init__(self, op: int, skips: tuple[int, ...], channels: int, index: int) -> None:
        super().__init__()
        self.op_name = MACRO_OPS[op]
        self.skips = skips
        self.index = index
        c = channels
        inp = [nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
        k = 5 if self.op_name.endswith("5x5") else 3
        if self.op_name.startswith("conv"):
            out: list[nn.Module] = [nn.Conv2d(c, c, k, padding=k // 2, bias=False)]
        elif self.op_name.startswith("sep_conv"):
            out = [nn.Conv2d(c, c, k, padding=k // 2, groups=c, bias=False), nn.Conv2d(c, c, 1, bias=False)]
        elif self.op_name.startswith("avg"):
            out = [nn.AvgPool2d(3, 1, padding=1, count_include_pad=False)]
        else:
            out = [nn.MaxPool2d(3, 1, padding=1)]
        if "conv" in self.op_name:
            out += [nn.BatchNorm2d(c), nn.ReLU()]
        self.branch = nn.Sequential(*inp, *out)
        self.proj: nn.Module | None = None
        if index > 0:
            self.proj = ReLUConvBN((len(skips) + 1) * c, c)

    def forward(self, *previous: Tensor) -> Tensor:
        """Outputs of layers ``0..i-1`` (the stem output for layer 0) to this layer's output."""
        out = self.branch(previous[-1])
        if self.proj is None:
            return out
        return self.proj(torch.cat([previous[j] for j in self.skips] + [out], dim=1))

    def extra_repr(self) -> str:
        """Op and skips."""
        return f"op={self.op_name!r}, skips={self.skips}"


class MacroNet(nn.Module):
    """An ENAS macro-space network with loss: ``forward(images, labels)`` is the mean cross-entropy.

    Stem 3x3 conv to ``C`` channels + BatchNorm; ``L`` layers; after layers ``L // 3 - 1`` and
    ``2 (L // 3) - 1`` every layer output so far goes through a factorized reduction to twice the
    channels (ENAS ``pool_layers``); head and loss.

    Args:
        arch (MacroArch): ops and skips.
        channels (int): ``C``, the width of the first layers.
        dropout (float, optional): drop probability before the linear head. (default: :obj:`0.1`)
        num_classes (int, optional): classes. (default: :obj:`10`)
    """

    def __init__(self, arch: MacroArch, channels: int, dropout: float = 0.1, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.arch = arch
        num_layers = len(arch.ops)
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        distance = num_layers // 3
        self.pool_layers = tuple(i for i in (distance - 1, 2 * distance - 1) if i >= 0)
        self.layers = nn.ModuleList()
        self.pools = nn.ModuleDict()
        c = channels
        for i, (op, skips) in enumerate(zip(arch.ops, arch.skips, strict=True)):
            self.layers.append(MacroLayer(op, skips, c, i))
            if i in self.pool_layers:
                # Reduce only the outputs that a later layer reads (the others are dead code).
                later = {j for k in range(i + 1, num_layers) for j in arch.skips[k] if j <= i} | {i}
                self.pools[str(i)] = nn.ModuleDict({str(j): FactorizedReduction(c, 2 * c) for j in sorted(later)})
                c *= 2
        self.head = Head(c, num_classes, dropout)

    def forward(self, images: Tensor, labels: Tensor) -> Tensor:
        """Images ``[N, 3, 32, 32]`` (float) and labels ``[N]`` (int64) to the scalar loss."""
        x = self.stem(images)
        outs: list[Tensor] = []
        for i, layer in enumerate(self.layers):
            x = layer(*(outs if outs else [x]))
            outs.append(x)
            if str(i) in self.pools:
                pools: nn.ModuleDict = self.pools[str(i)]  # type: ignore[assignment]
                # An output no later layer reads keeps its old resolution; nothing reads it again.
                outs = [pools[str(j)](o) if str(j) in pools else o for j, o in enumerate(outs)]
                x = outs[-1]
        logits = self.head(x)
        # on the logits' device, as transformers' losses move them: accelerate's root hook puts inputs on its main GPU
        return F.cross_entropy(logits, labels.to(logits.device))


# --------------------------------------------------------------------------------------------------
# Size


def _sep_conv_params(c: int) -> int:
    """Parameters of a 5x5 :class:`SepConv` of ``c`` channels, the largest micro op."""
    return 2 * (25 * c + c * c + 2 * c)


def _micro_param_bound(layers: int, channels: int, num_blocks: int) -> int:
    """Parameters of the largest micro net: every op a 5x5 separable convolution, every block output concatenated."""
    reductions = {layers // 3, 2 * (layers // 3) + 1}
    params = 3 * 9 * 3 * channels + 2 * 3 * channels  # stem: 3x3 convolution from 3 to 3 C channels, BatchNorm
    c, c_pp, c_p = channels, 3 * channels, 3 * channels
    for i in range(layers + 2):
        c *= 2 if i in reductions else 1
        params += (c_pp + c_p) * c + 4 * c  # both inputs calibrated by a 1x1 convolution and BatchNorm
        params += 2 * num_blocks * _sep_conv_params(c)
        c_pp, c_p = c_p, num_blocks * c
    return params + c_p * NUM_CLASSES + NUM_CLASSES  # head


def _macro_param_bound(layers: int, channels: int, skips: bool) -> int:
    """Parameters of the largest macro net: every op a 5x5 convolution, every skip taken (if ``skips``)."""
    distance = layers // 3
    pool_layers = {i for i in (distance - 1, 2 * distance - 1) if i >= 0}
    params = 3 * 3 * 3 * channels + 2 * channels  # stem
    c = channels
    for i in range(layers):
        params += c * c + 2 * c + 25 * c * c + 2 * c  # 1x1 conv-BN, 5x5 conv-BN
        if i > 0:
            params += ((i if skips else 0) + 1) * c * c + 2 * c  # projection of the concatenation
        if i in pool_layers:
            params += (i + 1) * (2 * c * c + 4 * c)  # a factorized reduction of every output so far
            c *= 2
    return params + c * NUM_CLASSES + NUM_CLASSES  # head


def estimate_size(
    *, layers: int = 6, channels: int = 20, space: str = "micro", num_blocks: int = 5, skip_prob: float = 0.4
) -> SizeEstimate:
    """Upper bounds on the training graph's ops and the parameter bytes of any network :func:`sample` can draw.

    Computed from the knobs alone (the heaviest architecture they allow), before anything is drawn or built. A micro
    net has at most ``40 + (L + 2)(30 + 56 B)`` ops; a macro net ``52 + 32 (L - 1) + L (L - 1) / 2 + 60 (L // 3)``
    (one op per skip, a factorized reduction per earlier output at each pool layer). The drawn architectures have
    about half as many (two fifths of the drawn micro ops are separable convolutions, not all).

    Args:
        layers (int, optional): ``L``. (default: :obj:`6`)
        channels (int, optional): ``C`` (channels). (default: :obj:`20`)
        space (str, optional): ``"micro"`` or ``"macro"``. (default: :obj:`"micro"`)
        num_blocks (int, optional): micro blocks per cell, ``B``. (default: :obj:`5`)
        skip_prob (float, optional): macro skip probability; above 0 every skip may be drawn. (default: :obj:`0.4`)

    Returns:
        SizeEstimate: ops of the imported training graph and bytes of float32 parameters.

    Raises:
        UnknownName: for an unknown ``space`` (any other name was estimated as the macro space).
        InvalidArgument: for a count knob that is no integer or below its least (``channels`` 2, the others 1) or a
            ``skip_prob`` outside ``[0, 1]`` (a negative count gave negative ops). The caps of :func:`sample` are
            not checked: an estimate says how large knobs past them would build.

    Examples:
        >>> estimate_size(layers=840, channels=16).ops  # the benchmarks' 100,000-op graph
        261060
    """
    check_choice("search space", space, SPACES)
    layers, channels = check_int("layers", layers, 1), check_int("channels", channels, 2)
    num_blocks, skip_prob = check_int("num_blocks", num_blocks, 1), check_probability("skip_prob", skip_prob)
    if space == "micro":
        ops = _FIXED_OPS + (layers + 2) * (_MICRO_CELL_OPS + _MICRO_BLOCK_OPS * num_blocks)
        params = _micro_param_bound(layers, channels, num_blocks)
    else:
        skips = layers * (layers - 1) // 2 if skip_prob > 0 else 0
        ops = (_FIXED_OPS + _MACRO_FIRST_LAYER_OPS + _MACRO_LAYER_OPS * (layers - 1) + skips
               + _MACRO_REDUCTION_OPS * 3 * (layers // 3))
        params = _macro_param_bound(layers, channels, skip_prob > 0)
    return SizeEstimate(ops=ops, param_bytes=4 * params)


# --------------------------------------------------------------------------------------------------
# Sampling


def sample(
    rng: SeedLike,
    *,
    layers: int = 6,
    channels: int = 20,
    batch: int = 160,
    space: str = "micro",
    num_blocks: int = 5,
    skip_prob: float = 0.4,
    dropout: float = 0.1,
) -> tuple[MicroNet | MacroNet, tuple[Tensor, Tensor]]:
    """Draw a random ENAS CNN for CIFAR-10 and a batch of inputs.

    The defaults are the ENAS micro search setting (L = 6, C = 20, batch 160); the final ENAS
    micro net used L = 15, C = 36, batch 144, and the macro space L = 12..24, C = 36..96.

    Args:
        rng (int, numpy.random.Generator or None): the seed (an int ``s`` draws as ``numpy.random.default_rng(s)``;
            ``None`` a fresh one): draws the architecture, then the torch seed for weights and inputs.
        layers (int, optional): ``L``: micro nets have ``L + 2`` cells (at most :data:`MAX_LAYERS`), macro nets
            ``L`` layers (at most :data:`MAX_MACRO_LAYERS`). (default: :obj:`6`)
        channels (int, optional): ``C``, width of the first cells or layers (channels, at most
            :data:`MAX_CHANNELS`). (default: :obj:`20`)
        batch (int, optional): images per batch (at most :data:`MAX_BATCH`). (default: :obj:`160`)
        space (str, optional): ``"micro"`` or ``"macro"``. (default: :obj:`"micro"`)
        num_blocks (int, optional): micro blocks per cell, ``B`` (at most :data:`MAX_NUM_BLOCKS`). (default: :obj:`5`)
        skip_prob (float, optional): macro skip probability. (default: :obj:`0.4`)
        dropout (float, optional): head drop probability. (default: :obj:`0.1`)

    Returns:
        tuple[MicroNet | MacroNet, tuple[Tensor, Tensor]]: the network (training mode; ``forward`` returns
        the scalar loss) and its inputs: images ``[batch, 3, 32, 32]`` float32, labels ``[batch]`` int64.

    Raises:
        UnknownName: for an unknown ``space``.
        InvalidArgument: for a knob out of range (a probability outside ``[0, 1]``, a size past its cap), a
            non-integer count knob or a non-numeric probability; for knobs whose :func:`estimate_size` is past
            :data:`MAX_GRAPH_OPS` ops or :data:`MAX_PARAM_BYTES` bytes of parameters; or a seed that is not an
            int >= 0, a numpy generator or None.

    Examples:
        >>> model, (images, labels) = sample(np.random.default_rng(0), layers=1, channels=4, batch=2)
        >>> tuple(images.shape), model(images, labels).dim()
        ((2, 3, 32, 32), 0)
    """
    rng = as_generator(rng)
    check_choice("search space", space, SPACES)
    if space == "micro":
        layers = check_int("layers", layers, 1, MAX_LAYERS, cap="cifar10.MAX_LAYERS")
    else:
        layers = check_int("layers", layers, 1, MAX_MACRO_LAYERS, cap="cifar10.MAX_MACRO_LAYERS")
    channels = check_int("channels", channels, 2, MAX_CHANNELS, cap="cifar10.MAX_CHANNELS")
    batch = check_int("batch", batch, 1, MAX_BATCH, cap="cifar10.MAX_BATCH")
    num_blocks = check_int("num_blocks", num_blocks, 1, MAX_NUM_BLOCKS, cap="cifar10.MAX_NUM_BLOCKS")
    skip_prob = check_probability("skip_prob", skip_prob)
    dropout = check_probability("dropout", dropout)
    grows_with = {"layers": layers, "channels": channels}
    grows_with.update({"num_blocks": num_blocks} if space == "micro" else {})
    check_size("cifar10", grows_with, estimate_size(layers=layers, channels=channels, space=space,
                                                    num_blocks=num_blocks, skip_prob=skip_prob))
    arch = sample_micro_arch(rng, num_blocks) if space == "micro" else sample_macro_arch(rng, layers, skip_prob)
    with seeded_float32(rng):  # the architecture is drawn first, then weights and inputs
        model: MicroNet | MacroNet
        if isinstance(arch, MicroArch):
            model = MicroNet(arch, layers, channels, dropout)
        else:
            model = MacroNet(arch, channels, dropout)
        images = torch.randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE)
        labels = torch.randint(0, NUM_CLASSES, (batch,))
    return model, (images, labels)


def random_knobs(rng: SeedLike, space: str = "micro") -> dict[str, Any]:
    """Draw knobs for :func:`sample` spanning small to large training graphs.

    Micro: ``layers`` 1..30 (about 300 to 6,400 ops of the imported training graph), ``channels``
    8..48 (log-uniform, even), ``batch`` 32..160 (multiple of 16). Macro: ``layers`` 4..24 (about 150 to
    1,300 ops), ``channels`` 16..96, same batches. Datasets (:func:`gnplace.datasets.generate_graph`) draw
    with the default, micro.

    Args:
        rng (int, numpy.random.Generator or None): the generator, or a seed of one.
        space (str, optional): the search space to draw for. (default: :obj:`"micro"`)

    Returns:
        dict[str, Any]: keyword arguments of :func:`sample`.

    Examples:
        >>> sorted(random_knobs(np.random.default_rng(0)))
        ['batch', 'channels', 'layers', 'space']
    """
    rng = as_generator(rng)  # a seed too, as the package says (an int was an AttributeError)
    check_choice("search space", space, SPACES)
    if space == "micro":
        layers = int(rng.integers(1, 31))
        channels = log_uniform_int(rng, 8, 48, multiple=2)
    else:
        layers = int(rng.integers(4, 25))
        channels = log_uniform_int(rng, 16, 96, multiple=4)
    batch = 16 * int(rng.integers(2, 11))
    return {"layers": layers, "channels": channels, "batch": batch, "space": space}
