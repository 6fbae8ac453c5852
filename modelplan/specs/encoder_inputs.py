"""Inputs of an encoder that reads images or audio instead of tokens (`TransformerSpec.inputs`):
standalone ViTs (ViT, DeiT, DINOv2, the CLIP / SigLIP vision models) and the wav2vec 2.0 family
(wav2vec2, HuBERT, UniSpeech, UniSpeech-SAT, data2vec-audio, WavLM) and the filter-bank
encoders (Wav2Vec2-BERT, Parakeet, LASR: `FeatureInput`). The blocks stay the
transformer block stack's; this sub-spec states what replaces the token table and what task head
sits after the final norm (transformers 5.24: modeling_vit.py, modeling_deit.py,
modeling_dinov2.py, modeling_clip.py, modeling_siglip.py, modeling_wav2vec2.py, modeling_wavlm.py).

With `inputs` set there is no token table (`vocab` sizes only a CTC head), a sequence is one
image (patches + prefix tokens) or one clip of audio (its frames).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from modelplan.specs.base import Spec
from modelplan.specs.blocks import ConnectorLayer


class HeadLayer(ConnectorLayer):
    """One layer of the task head after the encoder (DeiT's two classifiers, DINOv2's classifier
    over [CLS, mean patch], wav2vec2's projector + classifier, SigLIP's logit scale): rows 1 runs
    once per sequence (pooled), rows None on every token; keyed under `head/`."""


class PatchInput(Spec):
    """A ViT patch embedding: Conv2d(channels, h, kernel=stride=patch_size) over an image of
    image_size x image_size pixels, `prefix_tokens` learned vectors prepended (CLS; DeiT's
    distillation token), a learned position row per token (the spec's max_positions)."""

    modality: Literal["image"] = "image"
    channels: int = Field(3, gt=0)
    """Image channels (HF num_channels)."""
    patch_size: int = Field(gt=0)
    """Square patch side in pixels."""
    image_size: int = Field(gt=0)
    """Square image side in pixels; image_size // patch_size patches per side."""
    input_size: list[int] | None = Field(None, min_length=2, max_length=2)
    """[height, width] of a non-square input (AST: [num_mel_bins, max_length] of a spectrogram);
    None: image_size x image_size."""
    patch_stride: list[int] | None = Field(None, min_length=2, max_length=2)
    """[height, width] stride of the patch conv where patches overlap (AST frequency_stride,
    time_stride); None: patch_size."""
    patch_bias: bool = True
    """Bias on the patch conv (CLIP's has none)."""
    prefix_tokens: int = Field(1, ge=0)
    """Learned h-vectors prepended to the patches: ViT / DINOv2 / CLIP 1 (cls_token), DeiT 2 (cls +
    distillation), SigLIP 0."""
    register_tokens: int = Field(0, ge=0)
    """Learned h-vectors inserted after the prefix once the positions are added (DINOv2 with
    registers): tokens without a position row."""
    mask_token: bool = False
    """A learned h-vector replacing masked patches (DINOv2 always builds it; ViT use_mask_token)."""
    qv_bias: bool = False
    """Biases on q and v but not on k (DINOv3 key_bias false), with the spec's qkv_bias false: 2h a
    block, no matmul."""
    relative_bias: Literal["none", "block", "shared"] = "none"
    """BEiT's relative position bias table, ((2 s - 1)^2 + 3) x heads for an s x s patch grid (the
    3: cls to token, token to cls, cls to cls): one per block, or one shared by all blocks."""
    pooling_head: bool = False
    """SigLIP's attention-pooling head (vision_use_head; count.vision.pooling_head_params)."""
    head: list[HeadLayer] = Field(default_factory=list)
    """Task-head layers beyond the spec's pooler / classifier."""

    @property
    def grid(self) -> tuple[int, int]:
        """Rows and columns of patches: (size - patch) // stride + 1 each way (Conv2d without padding)."""
        size = self.input_size or [self.image_size] * 2
        stride = self.patch_stride or [self.patch_size] * 2
        rows, cols = ((n - self.patch_size) // s + 1 for n, s in zip(size, stride))
        return rows, cols

    @property
    def patches(self) -> int:
        """Patches of one image."""
        rows, cols = self.grid
        return rows * cols

    @property
    def relative_rows(self) -> int:
        """Rows of one relative position bias table (BeitRelativePositionBias.num_relative_distance)."""
        side = self.image_size // self.patch_size
        return (2 * side - 1) ** 2 + 3

    @property
    def tokens(self) -> int:
        """Tokens the blocks run on per image: patches, prefix and register tokens."""
        return self.patches + self.prefix_tokens + self.register_tokens

    @model_validator(mode="after")
    def _check(self) -> "PatchInput":
        if self.patch_size > min(self.input_size or [self.image_size]):
            raise ValueError(f"patch_size ({self.patch_size}) exceeds the input ({self.input_size or self.image_size})")
        if any(v < 1 for v in (*(self.input_size or ()), *(self.patch_stride or ()))):
            raise ValueError("input_size and patch_stride must be positive")
        return self


class AudioConvInput(Spec):
    """wav2vec 2.0's input (Wav2Vec2FeatureEncoder + Wav2Vec2FeatureProjection +
    Wav2Vec2PositionalConvEmbedding): raw samples through Conv1d layers (conv_dim / conv_kernel /
    conv_stride, one input channel), a GroupNorm on the first conv ('group') or a LayerNorm after
    every conv ('layer'); a LayerNorm and Linear(conv_dim[-1], h) per frame; a grouped, weight-normed
    Conv1d(h, h, position_kernel, padding position_kernel // 2) added to the frames."""

    modality: Literal["audio"] = "audio"
    conv_dim: list[int] = Field(min_length=1)
    """Output channels of each feature conv."""
    conv_kernel: list[int] = Field(min_length=1)
    """Kernel width of each feature conv."""
    conv_stride: list[int] = Field(min_length=1)
    """Stride of each feature conv."""
    conv_bias: bool = False
    """Bias on the feature convs."""
    conv_norm: Literal["group", "layer"] = "group"
    """group: GroupNorm(c, c) after the first conv only; layer: a LayerNorm(c) after every conv."""
    projection_norm: bool = True
    """LayerNorm(conv_dim[-1]) before the feature projection (HuBERT feat_proj_layer_norm)."""
    position_kernel: int = Field(128, gt=0)
    """Kernel of the positional conv (HF num_conv_pos_embeddings)."""
    position_groups: int = Field(16, gt=0)
    """Groups of the positional conv (HF num_conv_pos_embedding_groups)."""
    position_layers: int = Field(1, gt=0)
    """Positional convs in a row (data2vec-audio: num_conv_pos_embeddings of them, each followed
    by a LayerNorm without parameters)."""
    position_weight_norm: bool = True
    """The positional conv is weight-normed (weight_v and a per-tap weight_g; data2vec-audio's are
    plain convs)."""
    masked_embedding: bool = True
    """The learned masked_spec_embed (h) that SpecAugment writes over masked frames (built when
    mask_time_prob or mask_feature_prob is positive)."""
    gated_relative_bias: bool = False
    """WavLM's gated relative position bias: the spec's bucketed bias table (position 'relative',
    in the first block) scaled per head and query by a gate from gru_rel_pos_linear
    Linear(head_dim, 8) over each head's input and gru_rel_pos_const (heads), in every block."""
    sample_rate: int = Field(16000, gt=0)
    """Samples per second of the input audio (the feature extractor's sampling_rate)."""
    projection: bool = True
    """The feature projection Linear(conv_dim[-1], h) (SEW builds it only when the widths differ)."""
    squeeze: int = Field(1, gt=0)
    """SEW's squeeze_factor: the blocks run on frames // squeeze tokens (an AvgPool1d; the positional
    conv strides by it); a sequence's tokens are these squeezed ones, and the head's per-token
    layers run on the squeeze x tokens upsampled frames."""
    upsample: bool = False
    """SEWUpsampling's Linear(h, h squeeze) on every squeezed token, its output reshaped into
    squeeze frames of h (built even at squeeze 1)."""
    head: list[HeadLayer] = Field(default_factory=list)
    """Task-head layers beyond the spec's CTC head (lm_head)."""

    @model_validator(mode="after")
    def _check(self) -> "AudioConvInput":
        if not len(self.conv_dim) == len(self.conv_kernel) == len(self.conv_stride):
            raise ValueError(f"conv_dim ({len(self.conv_dim)}), conv_kernel ({len(self.conv_kernel)}) and "
                             f"conv_stride ({len(self.conv_stride)}) must have one entry per conv layer")
        if any(v <= 0 for v in (*self.conv_dim, *self.conv_kernel, *self.conv_stride)):
            raise ValueError("conv_dim, conv_kernel and conv_stride must be positive")
        return self

    def lengths(self, frames: int) -> list[int]:
        """Samples, then each conv's output length, of the shortest input giving `frames` frames
        (L_out = (L_in - kernel) // stride + 1, inverted: L_in = (L_out - 1) stride + kernel)."""
        out = [frames]
        for k, s in zip(reversed(self.conv_kernel), reversed(self.conv_stride)):
            out.append((out[-1] - 1) * s + k)
        return out[::-1]

    def frames(self, samples: int) -> int:
        """Frames of `samples` input samples (Wav2Vec2Model._get_feat_extract_output_lengths)."""
        for k, s in zip(self.conv_kernel, self.conv_stride):
            samples = (samples - k) // s + 1
        return samples


class FeatureInput(Spec):
    """Filter-bank features (num_mel_bins a 10 ms frame) through `front` layers before the blocks:
    Wav2Vec2-BERT's feature projection (LayerNorm and Linear over stacked frames), Parakeet's
    Conv2d subsampling and linear, LASR's dense / strided Conv1d / dense subsampler. A front
    layer's `rows` are its rows per encoder frame (a strided conv before the last stride runs on
    more rows than there are frames; Conv2d: its time x frequency output positions); None: one."""

    modality: Literal["features"] = "features"
    front: list[HeadLayer] = Field(min_length=1)
    """The front layers, in order, keyed under `embedding/front/`."""
    frames_per_second: int = Field(gt=0)
    """Encoder frames of one second of audio (100 feature frames over the front's subsampling)."""
    masked_embedding: bool = False
    """The learned masked_spec_embed (h) written over masked frames (Wav2Vec2-BERT)."""
    qv_bias: bool = False
    """Biases on q and v but not on k (Whisper's encoder k_proj), with the spec's qkv_bias false:
    2h a block, no matmul."""
    head: list[HeadLayer] = Field(default_factory=list)
    """Task-head layers beyond the spec's CTC head (lm_head)."""


EncoderInput = Annotated[Union[PatchInput, AudioConvInput, FeatureInput], Field(discriminator="modality")]
"""What an encoder reads instead of tokens, by `modality`."""
