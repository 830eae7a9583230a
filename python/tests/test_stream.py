"""Streaming sessions (model.decode_stream / encode_stream) on the CPU in float32: any split into blocks gives
the whole clip's run for every family, LTX-2's with the frames it holds back given by finish(); sessions are
independent (interleaved, from threads, cloned, reset), and a refused push or finish raises one line and
leaves the session as it was."""

import os
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import vaecodec
from conftest import ROOT, TINY, relative_error

FAMILIES = sorted(TINY)
# LTX-2's decoder looks ahead (Note [Decoders that look ahead] in core/vae_model.h): its two tiny configs.
LTX2 = {tag: ROOT / "tests" / "data" / "ltx2-tiny" / f"weights-{tag}.safetensors" for tag in ("20", "23")}


@pytest.fixture(scope="module")
def models():
    return {family: vaecodec.load(path, device="cpu", dtype="fp32") for family, path in TINY.items()}


@pytest.fixture(scope="module")
def ltx2_models():
    return {tag: vaecodec.load(path, device="cpu", dtype="fp32") for tag, path in LTX2.items()}


def latents_for(model, t=5, h=6, w=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, model.latent_channels, t, h, w, generator=g)


def frames_for(model, t=17, seed=0):
    f = model.spatial_factor
    g = torch.Generator().manual_seed(seed)
    return torch.rand(1, 3, t, 4 * f, 5 * f, generator=g) * 2 - 1


def push_all(stream, x, blocks):
    out, at, i = [], 0, 0
    while at < x.size(2):
        n = min(blocks[i % len(blocks)], x.size(2) - at)
        out.append(stream.push(x[:, :, at:at + n]))
        at, i = at + n, i + 1
    return torch.cat(out, 2)


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_blocks_equal_the_whole_clip(models, family):
    m = models[family]
    z = latents_for(m)
    whole = m.decode(z)
    for blocks in ([1], [2, 3], [3, 1], [5]):
        with m.decode_stream() as s:
            first = s.push(z[:, :, :blocks[0]])
            assert first.shape[2] == 1 + m.temporal_factor * (blocks[0] - 1)
            rest = push_all(s, z[:, :, blocks[0]:], blocks) if blocks[0] < z.size(2) else first[:, :, :0]
            got = torch.cat([first, rest], 2)
            assert got.shape == whole.shape and got.dtype == whole.dtype
            assert relative_error(got, whole) <= 1e-5, blocks
            assert s.frames_in == 5 and s.frames_out == whole.shape[2] and s.pending_frames == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_encode_frames_wait_for_their_group(models, family):
    m = models[family]
    video = frames_for(m)
    whole = m.encode(video)
    with m.encode_stream() as s:
        counts, pending = [], []
        parts = []
        at = 0
        for n in (1, 3, 2, 6, 5):
            parts.append(s.push(video[:, :, at:at + n]))
            at += n
            counts.append(parts[-1].shape[2])
            pending.append(s.pending_frames)
        assert counts == [1, 0, 1, 1, 2]
        assert pending == [0, 3, 1, 3, 0]
        got = torch.cat(parts, 2)
        assert got.dtype == torch.float32 and not got.is_inference()
        assert relative_error(got, whole) <= 1e-5


def test_raw_latents_both_ways(models):
    m = models["wan2.1-vae"]
    video = frames_for(m, t=9)
    raw = m.encode(video, normalized=False)
    with m.encode_stream(normalized=False) as s:
        assert relative_error(push_all(s, video, [4, 5]), raw) <= 1e-5
    with m.decode_stream(normalized=False) as s:
        assert relative_error(push_all(s, raw, [1]), m.decode(raw, normalized=False)) <= 1e-5


def test_uint8_frames_for_an_encoder(models):
    m = models["wan2.1-vae"]
    z = latents_for(m, t=3)
    want = ((m.decode(z).float() + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 4, 1)
    with m.decode_stream(output="uint8") as s:
        got = torch.cat([s.push(z[:, :, :2]), s.push(z[:, :, 2:])], 1)  # [B, T, H, W, 3]: T is dim 1
    assert got.dtype == torch.uint8 and got.shape == (1, 9, 48, 64, 3)
    assert torch.equal(got, want)


def test_sessions_are_independent_interleaved_and_from_threads(models):
    m = models["wan2.1-vae"]
    clips = [latents_for(m, seed=k) for k in range(4)]
    wholes = [m.decode(c) for c in clips]
    a, b = m.decode_stream(), m.decode_stream()
    out_a, out_b = [], []
    for i in range(5):
        out_a.append(a.push(clips[0][:, :, i:i + 1]))
        out_b.append(b.push(clips[1][:, :, i:i + 1]))
    assert relative_error(torch.cat(out_a, 2), wholes[0]) <= 1e-5
    assert relative_error(torch.cat(out_b, 2), wholes[1]) <= 1e-5

    results, errors = {}, []

    def run(k):
        try:
            with m.decode_stream() as s:
                results[k] = push_all(s, clips[k], [1, 2])
        except Exception as e:  # reported below: an assertion here would be lost in the thread
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        assert relative_error(results[k], wholes[k]) <= 1e-5


def test_clone_branches_and_reset_rewinds(models):
    m = models["wan2.1-vae"]
    z = latents_for(m)
    other = latents_for(m, seed=9)
    whole = m.decode(z)
    s = m.decode_stream()
    head = s.push(z[:, :, :2])
    branch = s.clone()
    assert branch.state_bytes == s.state_bytes > 0
    diverged = branch.push(other[:, :, 2:])
    tail = s.push(z[:, :, 2:])
    assert relative_error(torch.cat([head, tail], 2), whole) <= 1e-5
    assert relative_error(diverged, tail) > 1e-3
    s.reset()
    assert s.state_bytes == 0 and s.frames_in == 0
    assert relative_error(push_all(s, z, [3]), whole) <= 1e-5
    enc = m.encode_stream()
    enc.push(frames_for(m, t=3))
    assert enc.clone().pending_frames == 2


def test_refused_pushes_raise_one_line_and_change_nothing(models):
    m = models["wan2.1-vae"]
    z = latents_for(m)
    whole = m.decode(z)
    s = m.decode_stream()
    head = s.push(z[:, :, :2])
    state = s.state_bytes
    refused = [
        (z[:, :15, 2:3], ValueError, "shaped [B, 16, T, h, w]"),
        (z[:, :, 2:3, :4], ValueError, "this clip's blocks are [1, 16, -1, 6, 8]"),
        (z[:, :, 2:3].to(torch.int32), TypeError, "floating-point"),
        ("latents", TypeError, "expects a tensor"),
    ]
    for block, kind, text in refused:
        with pytest.raises(kind) as e:
            s.push(block)
        assert text in str(e.value) and "\n" not in str(e.value)
        assert s.state_bytes == state and s.frames_in == 2
    tail = s.push(z[:, :, 2:])
    assert relative_error(torch.cat([head, tail], 2), whole) <= 1e-5
    s.close()
    assert s.closed
    with pytest.raises(ValueError, match="the session is closed"):
        s.push(z[:, :, :1])
    s.close()  # twice: harmless
    with pytest.raises(ValueError, match="output must be one of"):
        m.decode_stream(output="rgb")
    with pytest.raises(ValueError, match="for decode streams"):
        vaecodec.stream.make_stream(m, "encode", output="uint8")
    with pytest.raises(ValueError, match="pinned=True is for a model on CUDA"):
        m.decode_stream(output="uint8", pinned=True)
    with pytest.raises(ValueError, match="stream= is for a model on CUDA"):
        m.decode_stream().push(z[:, :, :1], stream=object())


def run_failing_second_call(script):
    """Runs `script` in a process whose 2nd model call runs out of memory (the engine's test hook, Note [Running
    out of memory]); the script prints "ok" when what it checks holds."""
    env = dict(os.environ, VAECODEC_TEST_OOM="call=2")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                          cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


def test_a_push_that_fails_while_it_runs_leaves_the_session_as_it_was(tmp_path):
    # The engine's out-of-memory hook (Note [Running out of memory]) fails the 2nd model call of the process:
    # inside a push of two chunks, after the first has changed the cache.
    script = f"""
import torch, vaecodec
m = vaecodec.load({str(TINY['wan2.1-vae'])!r}, device="cpu", dtype="fp32")
z = torch.randn(1, 16, 5, 6, 8, generator=torch.Generator().manual_seed(0))
s = m.decode_stream(chunk=1)
head = s.push(z[:, :, :1])              # model call 1
state = s.state_bytes
try:
    s.push(z[:, :, 1:3])                # calls 2 (fails) and 3
    raise SystemExit("the push did not fail")
except RuntimeError as e:
    assert "out of memory" in str(e) and "\\n" not in str(e), str(e)
assert s.state_bytes == state and s.frames_in == 1 and s.frames_out == 1
tail = s.push(z[:, :, 1:])
got = torch.cat([head, tail], 2)
want = m.decode(z)
err = ((got - want).norm() / want.norm()).item()
assert err <= 1e-5, err
print("ok", err)
"""
    run_failing_second_call(script)


@pytest.mark.parametrize("tag", sorted(LTX2))
def test_a_decoder_that_looks_ahead_gives_its_last_frames_at_finish(ltx2_models, tag):
    # The Python package loads no float64 model (dtype= takes fp32, bf16, fp16): float32, as the tests above;
    # the engine's own tests check the same splits to 1e-12 in float64 (tests/test_session_lookahead.cpp).
    m = ltx2_models[tag]
    assert m.temporal_factor == 8
    z = latents_for(m, t=16, h=2, w=2)  # 121 frames, more than either tiny config holds back
    whole = m.decode(z)
    assert whole.shape[2] == 1 + 8 * 15
    for blocks in ([1], [2], [3], [1, 4], [5, 2, 3]):
        with m.decode_stream() as s:
            pushed = push_all(s, z, blocks)
            held = s.pending_frames
            assert 0 < held < whole.shape[2] and s.state_bytes > 0, blocks
            assert pushed.shape[2] + held == whole.shape[2] == s.frames_out + held
            end = s.finish()
            assert end.shape[2] == held
            got = torch.cat([pushed, end], 2)
            assert got.shape == whole.shape and got.dtype == whole.dtype
            assert relative_error(got, whole) <= 1e-5, blocks
            assert s.frames_in == 16 and s.frames_out == whole.shape[2]
            assert s.pending_frames == 0 and s.state_bytes == 0
    # A clone mid-clip finishes to the same frames; its source goes on with another future.
    s = m.decode_stream()
    head = s.push(z[:, :, :6])
    branch = s.clone()
    assert branch.pending_frames == s.pending_frames > 0 and branch.state_bytes == s.state_bytes
    tail = torch.cat([branch.push(z[:, :, 6:]), branch.finish()], 2)
    assert relative_error(torch.cat([head, tail], 2), whole) <= 1e-5
    s.push(latents_for(m, t=10, h=2, w=2, seed=3))
    assert s.finish().shape[2] > 0
    # After finish the next push starts a new clip, of another size.
    small = latents_for(m, t=3, h=2, w=3, seed=1)
    first = s.push(small[:, :, :1])
    assert s.frames_in == 1 and first.shape[2] == 0
    assert relative_error(torch.cat([first, push_all(s, small[:, :, 1:], [1]), s.finish()], 2),
                          m.decode(small)) <= 1e-5
    # uint8 frames at finish as at push.
    with m.decode_stream(output="uint8") as s:
        got = torch.cat([s.push(z[:, :, :9]), s.push(z[:, :, 9:]), s.finish()], 1)
    want = ((whole.float() + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 4, 1)
    assert got.dtype == torch.uint8 and got.shape == want.shape
    assert (got.int() - want.int()).abs().max().item() <= 1


@pytest.mark.parametrize("family", FAMILIES)
def test_finish_of_a_causal_decoder_or_an_encode_gives_no_frames(models, family):
    m = models[family]
    z = latents_for(m)
    with m.decode_stream() as s:
        got = push_all(s, z, [2])
        end = s.finish()
        assert end.shape == (1, 3, 0, got.shape[3], got.shape[4]) and end.dtype == got.dtype
        assert s.frames_out == got.shape[2] and s.pending_frames == 0 and s.state_bytes == 0
    video = frames_for(m, t=5)
    whole = m.encode(video)
    with m.encode_stream() as e:
        head = e.push(video[:, :, :3])
        with pytest.raises(ValueError) as refused:
            e.finish()
        text = str(refused.value)
        assert text.startswith("encode session: 2 frames wait for a group of 4") and "\n" not in text, text
        assert e.pending_frames == 2
        rest = e.push(video[:, :, 3:])
        assert relative_error(torch.cat([head, rest], 2), whole) <= 1e-5
        end = e.finish()
        assert end.shape == (1, m.latent_channels, 0, whole.shape[3], whole.shape[4])
        assert e.frames_out == 2 and e.state_bytes == 0
        assert relative_error(e.push(video), whole) <= 1e-5


def test_closing_a_stream_with_frames_held_back_warns(ltx2_models):
    m = ltx2_models["23"]
    z = latents_for(m, t=3, h=1, w=2)  # 17 frames, all held back until finish
    with pytest.warns(UserWarning, match="closed with 17 frames held back; call finish"):
        with m.decode_stream() as s:
            assert s.push(z).shape[2] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with m.decode_stream() as s:
            s.push(z)
            assert s.finish().shape[2] == 17
        with pytest.raises(KeyError):  # leaving on an exception: no warning on top of it
            with m.decode_stream() as s:
                s.push(z)
                raise KeyError("the generator failed")


def test_a_finish_that_fails_while_it_runs_leaves_the_clip_open(tmp_path):
    # As the push's test above: the 2nd model call of the process fails, here the finish's.
    script = f"""
import torch, vaecodec
m = vaecodec.load({str(LTX2['23'])!r}, device="cpu", dtype="fp32")
z = torch.randn(1, 4, 4, 1, 2, generator=torch.Generator().manual_seed(0))
s = m.decode_stream()
head = s.push(z)                        # model call 1
state, held = s.state_bytes, s.pending_frames
try:
    s.finish()                          # call 2 fails
    raise SystemExit("the finish did not fail")
except RuntimeError as e:
    assert "out of memory" in str(e) and "\\n" not in str(e), str(e)
assert s.state_bytes == state > 0 and s.pending_frames == held > 0 and s.frames_in == 4, (s.state_bytes, held)
end = s.finish()
assert end.shape[2] == held
got = torch.cat([head, end], 2)
want = m.decode(z)
err = ((got - want).norm() / want.norm()).item()
assert err <= 1e-5, err
print("ok", err)
"""
    run_failing_second_call(script)
