"""PyTorch modules of the Wan2.1 and SeedVR2 video VAEs, whole-clip forms for training (scripts/train_tiny.py).

Both are written from the project's specifications (the Wan2.1 and SeedVR2 VAE specs the golden data comes
with) and name their parameters as the released checkpoints do, so that `state_dict()` is a checkpoint vaecodec
loads as it is:
  WanVae     - the original Wan2.1 layout (`encoder.downsamples.N.residual.2.weight`, `conv1`, `conv2`, ...)
  SeedVR2Vae - SeedVR2's layout (`encoder.down_blocks.N.resnets.M.conv1.weight`, `mid_block.attentions.0.to_q`)
Each runs a whole clip at once (no causal cache): the specs show this equals the chunked reference, with
Wan2.1's two quirks (frame 0 passes the temporal downsampler untouched and skips the temporal upsampler, whose
history restarts at frame 1). `check_golden()` compares both with tests/data/*-tiny/cases.safetensors.

Pixels are in [-1, 1], tensors [batch, channels, frames, height, width], T = 1 + 4k frames.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------------------------
# Wan2.1


class WanCausalConv3d(nn.Conv3d):
    """Conv3d with symmetric zero padding in space and 2*pt zero frames before the clip."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0):
        super().__init__(cin, cout, kernel, stride=stride, padding=0)
        pt, ph, pw = (padding,) * 3 if isinstance(padding, int) else padding
        self.causal_pad = (pw, pw, ph, ph, 2 * pt, 0)

    def forward(self, x):
        if any(self.causal_pad):
            x = F.pad(x, self.causal_pad)
        return super().forward(x)


class WanRMSNorm(nn.Module):
    """y = x / max(|x|_2, 1e-12) * sqrt(C) * gamma over the channel axis (gamma [C,1,1,1] or [C,1,1])."""

    def __init__(self, channels, images=False):
        super().__init__()
        self.scale = channels**0.5
        self.gamma = nn.Parameter(torch.ones((channels, 1, 1) if images else (channels, 1, 1, 1)))

    def forward(self, x):
        y = F.normalize(x.float(), dim=1) * self.scale * self.gamma.float()
        return y.to(x.dtype)


class WanResidualBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        # Indices as in the released nn.Sequential: 0 norm, 1 SiLU, 2 conv, 3 norm, 4 SiLU, 5 dropout, 6 conv.
        self.residual = nn.Sequential(
            WanRMSNorm(cin), nn.SiLU(), WanCausalConv3d(cin, cout, 3, padding=1),
            WanRMSNorm(cout), nn.SiLU(), nn.Identity(), WanCausalConv3d(cout, cout, 3, padding=1))
        self.shortcut = WanCausalConv3d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.shortcut(x) if self.shortcut is not None else x
        return self.residual(x) + h


def frames_as_images(x):
    b, c, t, h, w = x.shape
    return x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w), b, t


def images_as_frames(y, b, t):
    bt, c, h, w = y.shape
    return y.reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4)


class WanAttentionBlock(nn.Module):
    """Single-head self-attention over the pixels of each frame."""

    def __init__(self, channels):
        super().__init__()
        self.norm = WanRMSNorm(channels, images=True)
        self.to_qkv = nn.Conv2d(channels, channels * 3, 1)
        self.proj = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        identity = x
        y, b, t = frames_as_images(x)
        bt, c, h, w = y.shape
        qkv = self.to_qkv(self.norm(y)).reshape(bt, 3, c, h * w).permute(1, 0, 3, 2)  # 3, bt, hw, c
        o = F.scaled_dot_product_attention(qkv[0].unsqueeze(1), qkv[1].unsqueeze(1), qkv[2].unsqueeze(1))
        o = o.squeeze(1).permute(0, 2, 1).reshape(bt, c, h, w)
        return images_as_frames(self.proj(o), b, t) + identity


class WanResample(nn.Module):
    def __init__(self, dim, mode):
        super().__init__()
        self.mode = mode
        if mode == "upsample2d" or mode == "upsample3d":
            self.resample = nn.Sequential(nn.Identity(), nn.Conv2d(dim, dim // 2, 3, padding=1))
            if mode == "upsample3d":
                self.time_conv = WanCausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        else:
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=2))
            if mode == "downsample3d":
                self.time_conv = nn.Conv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1))

    def forward(self, x):
        b, c, t, h, w = x.shape
        if self.mode == "upsample3d" and t > 1:
            # Frame 0 alone; frames 1.. through the causal time conv (its history starts empty at frame 1), each
            # giving two frames: channels [0, C) then [C, 2C).
            rest = self.time_conv(x[:, :, 1:])
            rest = rest.reshape(b, 2, c, t - 1, h, w).permute(0, 2, 3, 1, 4, 5).reshape(b, c, 2 * (t - 1), h, w)
            x = torch.cat([x[:, :, :1], rest], dim=2)
        y, b, t2 = frames_as_images(x)
        if self.mode.startswith("upsample"):
            y = F.interpolate(y.float(), scale_factor=2.0, mode="nearest-exact").to(y.dtype)
            y = self.resample[1](y)
        else:
            y = self.resample(y)
        x = images_as_frames(y, b, t2)
        if self.mode == "downsample3d" and t2 > 1:
            # Output frame 0 is input frame 0; frame j >= 1 is the conv over frames (2j-2, 2j-1, 2j).
            x = torch.cat([x[:, :, :1], self.time_conv(x)], dim=2)
        return x


class WanEncoder(nn.Module):
    def __init__(self, dim, z_dim, dim_mult, num_res_blocks, temperal_downsample):
        super().__init__()
        dims = [dim * u for u in [1] + list(dim_mult)]
        self.conv1 = WanCausalConv3d(3, dims[0], 3, padding=1)
        layers = []
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(num_res_blocks):
                layers.append(WanResidualBlock(cin, cout))
                cin = cout
            if i != len(dim_mult) - 1:
                layers.append(WanResample(cout, "downsample3d" if temperal_downsample[i] else "downsample2d"))
        self.downsamples = nn.Sequential(*layers)
        self.middle = nn.Sequential(WanResidualBlock(dims[-1], dims[-1]), WanAttentionBlock(dims[-1]),
                                    WanResidualBlock(dims[-1], dims[-1]))
        self.head = nn.Sequential(WanRMSNorm(dims[-1]), nn.SiLU(), WanCausalConv3d(dims[-1], z_dim * 2, 3, padding=1))

    def forward(self, x):
        return self.head(self.middle(self.downsamples(self.conv1(x))))


class WanDecoder(nn.Module):
    def __init__(self, dim, z_dim, dim_mult, num_res_blocks, temperal_downsample):
        super().__init__()
        dims = [dim * u for u in [dim_mult[-1]] + list(dim_mult[::-1])]
        temperal_upsample = list(temperal_downsample[::-1])
        self.conv1 = WanCausalConv3d(z_dim, dims[0], 3, padding=1)
        self.middle = nn.Sequential(WanResidualBlock(dims[0], dims[0]), WanAttentionBlock(dims[0]),
                                    WanResidualBlock(dims[0], dims[0]))
        layers = []
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
            if i in (1, 2, 3):
                cin = cin // 2
            for _ in range(num_res_blocks + 1):
                layers.append(WanResidualBlock(cin, cout))
                cin = cout
            if i != len(dim_mult) - 1:
                layers.append(WanResample(cout, "upsample3d" if temperal_upsample[i] else "upsample2d"))
        self.upsamples = nn.Sequential(*layers)
        self.head = nn.Sequential(WanRMSNorm(dims[-1]), nn.SiLU(), WanCausalConv3d(dims[-1], 3, 3, padding=1))

    def forward(self, z):
        return self.head(self.upsamples(self.middle(self.conv1(z))))


class WanVae(nn.Module):
    """Wan2.1's VAE (WanVAE_) with the released names. encode() gives the raw posterior (mean, logvar); the
    published latent normalisation ((mean - m) / s) is applied by whoever exchanges latents - vaecodec's encode
    applies it and its decode undoes it, so a round trip does not depend on it."""

    family = "wan2.1-vae"

    def __init__(self, dim=96, z_dim=16, dim_mult=(1, 2, 4, 4), num_res_blocks=2,
                 temperal_downsample=(False, True, True)):
        super().__init__()
        self.config = {"dim": dim, "z_dim": z_dim, "dim_mult": list(dim_mult), "num_res_blocks": num_res_blocks,
                       "attn_scales": [], "temperal_downsample": list(temperal_downsample)}
        self.z_dim = z_dim
        self.encoder = WanEncoder(dim, z_dim, dim_mult, num_res_blocks, temperal_downsample)
        self.conv1 = WanCausalConv3d(z_dim * 2, z_dim * 2, 1)
        self.conv2 = WanCausalConv3d(z_dim, z_dim, 1)
        self.decoder = WanDecoder(dim, z_dim, dim_mult, num_res_blocks, temperal_downsample)

    def encode(self, x):
        mu, logvar = self.conv1(self.encoder(x)).chunk(2, dim=1)
        return mu, logvar

    def decode(self, z):
        return self.decoder(self.conv2(z))


# ---------------------------------------------------------------------------------------------------------------
# SeedVR2


class SeedCausalConv3d(nn.Conv3d):
    """InflatedCausalConv3d: zero padding in space, 2*pt copies of the first frame before the clip."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0):
        super().__init__(cin, cout, kernel, stride=stride, padding=0)
        pt, ph, pw = (padding,) * 3 if isinstance(padding, int) else padding
        self.time_pad = 2 * pt
        self.space_pad = (pw, pw, ph, ph, 0, 0)

    def forward(self, x):
        if self.time_pad:
            x = torch.cat([x[:, :, :1].expand(-1, -1, self.time_pad, -1, -1), x], dim=2)
        if any(self.space_pad):
            x = F.pad(x, self.space_pad)
        return super().forward(x)


class FrameGroupNorm(nn.GroupNorm):
    """GroupNorm applied to each frame separately."""

    def forward(self, x):
        y, b, t = frames_as_images(x)
        y = F.group_norm(y.float(), self.num_groups, self.weight.float(), self.bias.float(), self.eps)
        return images_as_frames(y.to(x.dtype), b, t)


class SeedResnetBlock(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.norm1 = FrameGroupNorm(groups, cin, eps=1e-6)
        self.conv1 = SeedCausalConv3d(cin, cout, 3, padding=1)
        self.norm2 = FrameGroupNorm(groups, cout, eps=1e-6)
        self.conv2 = SeedCausalConv3d(cout, cout, 3, padding=1)
        self.conv_shortcut = SeedCausalConv3d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return (self.conv_shortcut(x) if self.conv_shortcut is not None else x) + h


class SeedAttention(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.to_q = nn.Linear(channels, channels)
        self.to_k = nn.Linear(channels, channels)
        self.to_v = nn.Linear(channels, channels)
        self.to_out = nn.ModuleList([nn.Linear(channels, channels)])

    def forward(self, x):
        y, b, t = frames_as_images(x)
        bt, c, h, w = y.shape
        n = F.group_norm(y.float(), self.group_norm.num_groups, self.group_norm.weight.float(),
                         self.group_norm.bias.float(), self.group_norm.eps).to(y.dtype)
        tokens = n.reshape(bt, c, h * w).transpose(1, 2)
        q, k, v = (m(tokens).unsqueeze(1) for m in (self.to_q, self.to_k, self.to_v))
        o = F.scaled_dot_product_attention(q, k, v).squeeze(1)
        o = self.to_out[0](o).transpose(1, 2).reshape(bt, c, h, w)
        return images_as_frames(o, b, t) + x


class SeedMidBlock(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.resnets = nn.ModuleList([SeedResnetBlock(channels, channels, groups) for _ in range(2)])
        self.attentions = nn.ModuleList([SeedAttention(channels, groups)])

    def forward(self, x):
        return self.resnets[1](self.attentions[0](self.resnets[0](x)))


class SeedDownsample(nn.Module):
    def __init__(self, channels, temporal):
        super().__init__()
        self.temporal = temporal
        if temporal:
            self.conv = SeedCausalConv3d(channels, channels, 3, stride=2, padding=(1, 0, 0))
        else:
            self.conv = SeedCausalConv3d(channels, channels, (1, 3, 3), stride=(1, 2, 2))

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1, 0, 0)))


class SeedUpsample(nn.Module):
    def __init__(self, channels, temporal):
        super().__init__()
        self.temporal = temporal
        self.factor_t = 2 if temporal else 1
        self.upscale_conv = nn.Conv3d(channels, channels * 4 * self.factor_t, 1)
        self.conv = SeedCausalConv3d(channels, channels, 3, padding=1)

    def forward(self, x):
        b, c, t, h, w = x.shape
        z = self.factor_t
        y = self.upscale_conv(x).reshape(b, 2, 2, z, c, t, h, w)  # b (x y z c) f h w
        y = y.permute(0, 4, 5, 3, 6, 1, 7, 2).reshape(b, c, t * z, h * 2, w * 2)  # b c (f z) (h x) (w y)
        if self.temporal:
            # Frame 0's two copies are adjacent: keep the first (the golden data says which).
            y = torch.cat([y[:, :, :1], y[:, :, 2:]], dim=2)
        return self.conv(y)


class SeedStage(nn.Module):
    def __init__(self, cin, cout, layers, groups, sampler_key=None, sampler=None):
        super().__init__()
        self.resnets = nn.ModuleList([SeedResnetBlock(cin if i == 0 else cout, cout, groups) for i in range(layers)])
        if sampler is not None:
            setattr(self, sampler_key, nn.ModuleList([sampler]))
        self.sampler_key = sampler_key if sampler is not None else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        if self.sampler_key:
            x = getattr(self, self.sampler_key)[0](x)
        return x


class SeedEncoder(nn.Module):
    def __init__(self, ch, layers, groups, latent, temporal_scale_num):
        super().__init__()
        n = len(ch)
        self.conv_in = SeedCausalConv3d(3, ch[0], 3, padding=1)
        blocks = []
        for i in range(n):
            down = SeedDownsample(ch[i], temporal=i >= n - 1 - temporal_scale_num) if i < n - 1 else None
            blocks.append(SeedStage(ch[max(i - 1, 0)], ch[i], layers, groups, "downsamplers", down))
        self.down_blocks = nn.ModuleList(blocks)
        self.mid_block = SeedMidBlock(ch[-1], groups)
        self.conv_norm_out = FrameGroupNorm(groups, ch[-1], eps=1e-6)
        self.conv_out = SeedCausalConv3d(ch[-1], 2 * latent, 3, padding=1)

    def forward(self, x):
        x = self.conv_in(x)
        for blk in self.down_blocks:
            x = blk(x)
        return self.conv_out(F.silu(self.conv_norm_out(self.mid_block(x))))


class SeedDecoder(nn.Module):
    def __init__(self, ch, layers, groups, latent, temporal_scale_num):
        super().__init__()
        ch = list(reversed(ch))
        n = len(ch)
        self.conv_in = SeedCausalConv3d(latent, ch[0], 3, padding=1)
        self.mid_block = SeedMidBlock(ch[0], groups)
        blocks = []
        for i in range(n):
            up = SeedUpsample(ch[i], temporal=i < temporal_scale_num) if i < n - 1 else None
            blocks.append(SeedStage(ch[max(i - 1, 0)], ch[i], layers + 1, groups, "upsamplers", up))
        self.up_blocks = nn.ModuleList(blocks)
        self.conv_norm_out = FrameGroupNorm(groups, ch[-1], eps=1e-6)
        self.conv_out = SeedCausalConv3d(ch[-1], 3, 3, padding=1)

    def forward(self, z):
        x = self.mid_block(self.conv_in(z))
        for blk in self.up_blocks:
            x = blk(x)
        return self.conv_out(F.silu(self.conv_norm_out(x)))


class SeedVR2Vae(nn.Module):
    """SeedVR2's VAE (config s8_c16_t4_inflation_sd3) with its checkpoint's names. encode() gives the raw
    posterior (mean, logvar); SeedVR2's scaling factor 0.9152 belongs to whoever exchanges latents."""

    family = "seedvr2-vae"

    def __init__(self, block_out_channels=(128, 256, 512, 512), layers_per_block=2, norm_num_groups=32,
                 latent_channels=16, temporal_scale_num=2):
        super().__init__()
        self.config = {"block_out_channels": list(block_out_channels), "norm_num_groups": norm_num_groups,
                       "layers_per_block": layers_per_block, "latent_channels": latent_channels,
                       "temporal_scale_num": temporal_scale_num, "inflation_mode": "pad", "use_quant_conv": False,
                       "use_post_quant_conv": False, "attention": True}
        self.z_dim = latent_channels
        args = (list(block_out_channels), layers_per_block, norm_num_groups, latent_channels, temporal_scale_num)
        self.encoder = SeedEncoder(*args)
        self.decoder = SeedDecoder(*args)

    def encode(self, x):
        mu, logvar = self.encoder(x).chunk(2, dim=1)
        return mu, logvar

    def decode(self, z):
        return self.decoder(z)


# ---------------------------------------------------------------------------------------------------------------
# Checks against the golden data


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def check_golden(root="tests/data", dtype=torch.float64, tol=1e-5, log=print):
    """Loads tests/data/wan21-tiny and seedvr2-tiny into the modules above and compares every case; returns the
    worst relative error and raises if it exceeds tol."""
    import json

    from safetensors.torch import load_file

    worst = 0.0
    meta = json.load(open(f"{root}/wan21-tiny/meta.json"))
    c = meta["config"]
    wan = WanVae(c["dim"], c["z_dim"], c["dim_mult"], c["num_res_blocks"], c["temperal_downsample"])
    wan.load_state_dict(load_file(f"{root}/wan21-tiny/weights.safetensors"), strict=True)
    wan = wan.to(dtype).eval()
    cases = {k: v.to(dtype) for k, v in load_file(f"{root}/wan21-tiny/cases.safetensors").items()}
    m = torch.tensor(meta["latent_mean"], dtype=dtype).view(1, -1, 1, 1, 1)
    s = torch.tensor(meta["latent_std"], dtype=dtype).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        for name, inp, out in (("video", "video", "video_mu"), ("image", "image", "image_mu")):
            mu = (wan.encode(cases[inp])[0] - m) / s
            e = rel(mu, cases[out])
            worst = max(worst, e)
            log(f"wan2.1 {out}: relative error {e:.2e}")
            rt = wan.decode(mu * s + m)
            e = rel(rt, cases[f"{inp}_roundtrip"])
            worst = max(worst, e)
            log(f"wan2.1 {inp}_roundtrip: relative error {e:.2e}")
        e = rel(wan.decode(cases["latent"] * s + m), cases["latent_decoded"])
        worst = max(worst, e)
        log(f"wan2.1 latent_decoded: relative error {e:.2e}")

    meta = json.load(open(f"{root}/seedvr2-tiny/meta.json"))
    c = meta["config"]
    seed = SeedVR2Vae(c["block_out_channels"], c["layers_per_block"], c["norm_num_groups"], c["latent_channels"],
                      c["temporal_scale_num"])
    seed.load_state_dict(load_file(f"{root}/seedvr2-tiny/weights.safetensors"), strict=True)
    seed = seed.to(dtype).eval()
    cases = {k: v.to(dtype) for k, v in load_file(f"{root}/seedvr2-tiny/cases.safetensors").items()}
    with torch.no_grad():
        mu, logvar = seed.encode(cases["video"])
        for name, got in (("video_mean_whole", mu), ("video_logvar_whole", logvar),
                          ("video_roundtrip_whole", seed.decode(mu)),
                          ("latent_decoded_whole", seed.decode(cases["latent"]))):
            e = rel(got, cases[name])
            worst = max(worst, e)
            log(f"seedvr2 {name}: relative error {e:.2e}")
    if worst > tol:
        raise SystemExit(f"golden check failed: worst relative error {worst:.2e} > {tol:.0e}")
    return worst


# ---------------------------------------------------------------------------------------------------------------
# diffusers' AutoencoderKLWan names <-> the original Wan2.1 names (for the cross-check with diffusers)


def wan_original_to_diffusers(sd, num_res_blocks=2):
    """Renames an original-layout Wan2.1 state dict to diffusers' AutoencoderKLWan layout (the spec's table)."""
    out = {}
    per_up = num_res_blocks + 2  # resnets + one upsampler per up block
    for k, v in sd.items():
        p = k.split(".")
        if p[0] == "conv1":
            p[0] = "quant_conv"
        elif p[0] == "conv2":
            p[0] = "post_quant_conv"
        else:
            if p[1] == "conv1":
                p[1] = "conv_in"
            elif p[1] == "head":
                p[1:3] = ["norm_out" if p[2] == "0" else "conv_out"]
            elif p[1] == "middle":
                i = int(p[2])
                p[1:3] = ["mid_block", "attentions", "0"] if i == 1 else ["mid_block", "resnets", str(i // 2)]
            elif p[1] == "downsamples":
                p[1] = "down_blocks"
            elif p[1] == "upsamples":
                i = int(p[2])
                blk, j = divmod(i, per_up)
                if j == per_up - 1:
                    p[1:3] = ["up_blocks", str(blk), "upsamplers", "0"]
                else:
                    p[1:3] = ["up_blocks", str(blk), "resnets", str(j)]
            # residual / shortcut inside a residual block
            for n, part in enumerate(p):
                if part == "residual":
                    idx = p[n + 1]
                    rest = p[n + 2:]
                    name = {"0": ["norm1"], "2": ["conv1"], "3": ["norm2"], "6": ["conv2"]}[idx]
                    p = p[:n] + name + rest
                    break
                if part == "shortcut":
                    p[n] = "conv_shortcut"
                    break
        out[".".join(p)] = v
    return out


def conv_flops(model, x):
    """Multiply-adds x2 of every conv/linear for input x (hooks), for the cost estimate in meta.json."""
    total = [0]

    def hook(mod, inp, out):
        if isinstance(mod, (nn.Conv3d, nn.Conv2d)):
            k = math.prod(mod.kernel_size) * mod.in_channels // mod.groups
            total[0] += 2 * out.numel() * k
        elif isinstance(mod, nn.Linear):
            total[0] += 2 * out.numel() * mod.in_features

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv3d, nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model.decode(model.encode(x)[0])
    for h in hs:
        h.remove()
    return total[0]


if __name__ == "__main__":
    check_golden()
