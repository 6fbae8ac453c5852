"""Parameters, forward FLOPs and activation bytes of a vision tower and its projector
(`specs.blocks.VisionSpec`), per image.

Parameters follow the HF modules (SiglipVisionModel + Gemma3MultiModalProjector, PixtralVisionModel
+ Mistral3 projector, CLIPVisionModel + LlavaMultiModalProjector, the Qwen-VL vision transformers
and PatchMergers, Llama4VisionModel, InternVLVisionModel, Idefics3 connector). FLOPs use the count
convention of `count.flops` (matmuls only, 2 per multiply-add; every query sees every key of its
image, or of its window in a windowed block); a training step's text-token FLOPs do not include
them: they are reported per image (`modelplan count`'s `vision` section).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.blocks import ConnectorLayer, VisionSpec


def _norm(vision: "VisionSpec", width: int) -> int:
    return width * (2 if vision.norm_bias else 1)


def _mlp_params(vision: "VisionSpec") -> int:
    h, f = vision.hidden, vision.ffn_hidden
    n_in = 2 if vision.gated_mlp else 1  # gated: gate_proj + up_proj; plain: fc1
    return (n_in + 1) * h * f + ((n_in * f + h) if vision.mlp_bias else 0)


def _kv_width(vision: "VisionSpec") -> int:
    """Width of the key (and of the value) projection: kv_heads x head_dim, else the query width."""
    return vision.q_width if vision.kv_heads is None else vision.kv_heads * vision.head_size


def _attention_params(vision: "VisionSpec") -> int:
    h, q = vision.hidden, vision.q_width
    qkv = q + 2 * _kv_width(vision)  # q (heads x head_dim) + k, v (kv_heads x head_dim each)
    # InternViT q_norm / k_norm: RMSNorm(h), no bias; GLM-OCR's / Gemma 4's: RMSNorm(head_dim)
    qk_norms = (2 * (vision.head_size if vision.qk_norm_per_head else h)) if vision.qk_norm else 0
    return qkv * h + q * h + (qkv if vision.qkv_bias else 0) + (h if vision.attn_out_bias else 0) + qk_norms


def pooling_head_params(h: int, f: int) -> int:
    """SiglipMultiheadAttentionPoolingHead: probe (1,1,h), nn.MultiheadAttention (in_proj 3h x h
    + bias, out_proj h x h + bias), LayerNorm, fc1/fc2 MLP (inner f) with biases."""
    return h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (2 * h * f + f + h)


def pooling_head_flops(h: int, f: int, t: int) -> int:
    """Forward FLOPs of that head over t tokens: one probe query, q (h x h), k/v over the t
    tokens, scores and AV, out, MLP."""
    return 2 * h * h + 2 * t * 2 * h * h + 2 * 2 * t * h + 2 * h * h + 2 * 2 * h * f


def connector_params(layer: "ConnectorLayer") -> int:
    """Parameters of one connector layer (all its copies)."""
    if layer.kind in ("linear", "conv"):  # Conv2d weight (out, in / groups, k, k)
        one = layer.in_features // layer.groups * layer.kernel ** 2 * layer.out_features \
            + (layer.out_features if layer.bias else 0)
    elif layer.kind == "attention":
        one = 0
    elif layer.kind == "layernorm":
        one = layer.in_features * (2 if layer.bias else 1)
    else:  # rmsnorm weight or a learned vector (image_newline)
        one = layer.in_features
    return layer.copies * one


def connector_rows(vision: "VisionSpec", layer: "ConnectorLayer") -> int:
    """Rows one image feeds this connector layer: its fixed rows (perceiver latents), else the
    tower's patches // merge + row_offset."""
    return layer.rows if layer.rows is not None else vision.patches // layer.merge + layer.row_offset


def connector_flops(vision: "VisionSpec", layer: "ConnectorLayer") -> int:
    """Forward FLOPs of one connector / tower layer (all its copies) per image: a linear or conv
    2 per multiply-add over its rows (torch.utils.flop_counter conv_flop: 2 x output positions x
    weight elements); an attention QK^T and AV, 2 x 2 x keys x width per row; norms and vectors 0."""
    rows = connector_rows(vision, layer)
    if layer.kind in ("linear", "conv"):
        return layer.copies * 2 * rows * layer.in_features // layer.groups * layer.kernel ** 2 * layer.out_features
    if layer.kind == "attention":
        return layer.copies * 2 * 2 * rows * layer.keys * layer.in_features
    return 0


def _layer_sums(prefix: str, layers: "list[ConnectorLayer]", value) -> dict[str, int]:
    """`value(layer)` summed per `prefix/name` key over `layers`."""
    out: dict[str, int] = {}
    for layer in layers:
        key = f"{prefix}/{layer.name}"
        out[key] = out.get(key, 0) + value(layer)
    return out


def vision_params(vision: "VisionSpec", text_hidden: int) -> dict[str, int]:
    """Leaf parameters of a vision tower and its projector, keyed relative to `vision/`."""
    if vision.tower is not None:  # a tower given as its layers (DaViT)
        return {**_layer_sums("tower", vision.tower, connector_params),
                **_layer_sums("projector", vision.connector or [], connector_params)}
    h, f = vision.hidden, vision.ffn_hidden
    rows = vision.position_rows or vision.tokens  # one per patch (+ the class token's)
    pooling = pooling_head_params(h, f)
    block = _mlp_params(vision) + (4 if vision.sandwich_norms else 2) * _norm(vision, h)
    conv = 4 * h * h + vision.conv_kernel ** 2 * h  # in_proj (h -> 3h), out_proj (h -> h), depthwise k x k kernel
    leaves = {
        # Conv2d(channels, h, kernel=stride=patch) / Conv3d(channels, h, (t, p, p)) / Llama 4's
        # unfold + Linear(channels p^2, h): channels * t * p^2 * h weights
        "tower/patch": vision.channels * vision.temporal_patch * vision.patch_size ** 2 * h
        + (h if vision.patch_bias else 0),
        "tower/class": h if vision.class_token else 0,
        "tower/position": rows * h if vision.position == "learned" else 0,
        "tower/norms": _norm(vision, h) * (int(vision.pre_norm) + int(vision.post_norm)),
        "tower/layers": vision.layers * (block + (2 * h if vision.layer_scale else 0))
        + vision.attention_layers * _attention_params(vision) + vision.conv_layers * conv,
        "tower/head": pooling if vision.pooling_head else 0,
    }
    leaves = {key: vision.towers * n for key, n in leaves.items()}  # Video-LLaVA: image + video towers
    if vision.connector is not None:
        for layer in vision.connector:
            key = f"projector/{layer.name}"
            leaves[key] = leaves.get(key, 0) + connector_params(layer)
        return leaves
    merged = h * vision.patch_merge ** 2
    second = text_hidden * text_hidden + (text_hidden if vision.projector_bias else 0)
    return {
        **leaves,
        "projector/norm": h if vision.projector_norm else 0,  # RMSNorm over the tower width
        "projector/merge": merged * h if vision.patch_merge > 1 else 0,  # Linear(h m^2, h, bias=False)
        "projector/proj": h * text_hidden + (text_hidden if vision.projector_bias else 0),
        "projector/proj2": second if vision.projector_layers == 2 else 0,
    }


def _window_pairs(vision: "VisionSpec") -> int:
    """(query, key) pairs of one windowed block: windows of w x w patches cut from the grid's
    top left (edge windows keep the remainder), each window's n patches attending to its n."""
    if vision.window_patches is None:
        return vision.tokens ** 2
    side, w = vision.image_size // vision.patch_size, vision.window_patches
    sides = [w] * (side // w) + ([side % w] if side % w else [])
    squares = sum(s * s for s in sides)  # patches of one row of windows, per window, squared sum
    return squares * squares  # sum over windows (a x b patches) of (a b)^2 = (sum a^2)(sum b^2)


def vision_forward_flops(vision: "VisionSpec", text_hidden: int) -> dict[str, int]:
    """Forward FLOPs of one image through the tower and projector, keyed relative to `vision/`."""
    if vision.tower is not None:
        flops = lambda layer: connector_flops(vision, layer)  # noqa: E731
        sums = {**_layer_sums("tower", vision.tower, flops), **_layer_sums("projector", vision.connector or [], flops)}
        return {key: n for key, n in sums.items() if n}  # norms and vectors run no matmul
    h, f, p, q = vision.hidden, vision.ffn_hidden, vision.patches, vision.q_width
    t = vision.tokens
    n_in = 2 if vision.gated_mlp else 1
    attending = vision.attention_layers
    windowed = 0 if vision.window_patches is None else attending - len(set(vision.full_attention_layers))
    # sum over blocks and queries of the keys each query sees: t^2 per full block, and per windowed
    # block the sum of n^2 over its windows (Qwen2_5_VisionTransformer.get_window_index)
    pairs = (attending - windowed) * t * t + windowed * _window_pairs(vision)
    out = {
        "tower/patch": 2 * p * vision.channels * vision.temporal_patch * vision.patch_size ** 2 * h,
        "tower/layers/attention/qkv": attending * 2 * t * h * (q + 2 * _kv_width(vision)),  # (t, h) @ (h, q + 2 kv)
        "tower/layers/attention/score": 2 * 2 * pairs * q,  # QK^T and AV: 2 q per (query, key) pair each
        "tower/layers/attention/out": attending * 2 * t * q * h,  # (t, q) @ (q, h)
        # short conv: in_proj (t, h) @ (h, 3h), depthwise k x k over each of h channels, out_proj (t, h) @ (h, h)
        "tower/layers/conv": vision.conv_layers * 2 * t * h * (4 * h + vision.conv_kernel ** 2),
        "tower/layers/mlp": vision.layers * 2 * t * (n_in + 1) * h * f,
        "tower/head": pooling_head_flops(h, f, t) if vision.pooling_head else 0,
    }
    if vision.connector is not None:
        for key, n in _layer_sums("projector", vision.connector, lambda layer: connector_flops(vision, layer)).items():
            if n:
                out[key] = n
        return out
    m2 = vision.patch_merge ** 2
    rows = vision.pooled_tokens or p // m2  # Gemma 3 average-pools to mm_tokens_per_image first
    return {
        **out,
        "projector/merge": 2 * (p // m2) * h * m2 * h if m2 > 1 else 0,
        "projector/proj": 2 * rows * h * text_hidden,
        "projector/proj2": 2 * rows * text_hidden * text_hidden if vision.projector_layers == 2 else 0,
    }


def vision_activation_bytes(vision: "VisionSpec", text_hidden: int, dtype_bytes: int) -> int:
    """Activation bytes one image keeps for the backward (no recompute, fused attention).

    Per block and token, Korthikanti et al. 2022 (arXiv 2205.05198) sec. 4.1 without dropout:
    both norm inputs and outputs (4h), Q, K, V (3h), the output-projection input (h), the MLP's
    inner tensors (2f plain: activation in and out; 3f gated: gate, up, product) in dtype_bytes,
    and the fused kernel's fp32 log-sum-exp per head (Dao 2023, FlashAttention-2, Alg. 1).
    Projector: each linear's input and its output's activation input."""
    h, f, t, d = vision.hidden, vision.ffn_hidden, vision.tokens, dtype_bytes
    if vision.tower is not None:  # each layer's input (an attention's Q, K and V: 3 x its width)
        return sum(layer.copies * d * connector_rows(vision, layer) * layer.in_features
                   * (3 if layer.kind == "attention" else 1)
                   for layer in (*vision.tower, *(vision.connector or [])) if layer.kind != "vector")
    inner = 3 if vision.gated_mlp else 2
    per_token = d * (8 * h + inner * f) + 4 * vision.heads
    tower = vision.layers * t * per_token + d * vision.patches * vision.channels * vision.temporal_patch \
        * vision.patch_size ** 2  # the patch conv keeps its pixels
    projector = 0
    if vision.connector is not None:
        for layer in vision.connector:
            if layer.kind != "vector":
                projector += layer.copies * d * connector_rows(vision, layer) * layer.in_features
    else:
        rows = vision.pooled_tokens or vision.patches // vision.patch_merge ** 2
        projector = d * (vision.patches * h + rows * h + (2 * rows * text_hidden if vision.projector_layers == 2 else 0))
    return tower + projector


def image_tokens(vision: "VisionSpec") -> int:
    """Text-sequence positions one image fills: the projector's output rows (the last linear's
    patches // merge; Gemma 3's pooled tokens; patches // m^2 after Mistral 3's merge)."""
    if vision.connector is not None:
        linears = [layer for layer in vision.connector if layer.kind in ("linear", "conv")]
        if linears:
            return connector_rows(vision, linears[-1])
        return 1 if vision.pooling_head else vision.patches  # SigLIP pairs: the pooling head's one embedding
    return vision.pooled_tokens or vision.patches // vision.patch_merge ** 2

