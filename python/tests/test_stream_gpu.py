"""Streaming sessions on a CUDA device: bf16 blocks bit-identical to the whole run cut the same way, pushes on
the caller's stream (or stream=) without waiting, uint8 frames on the device and in pinned memory, sessions
from several threads each on its own stream."""

import threading

import pytest
import torch

import vaecodec
from conftest import TINY

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def model():
    return vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="bf16", chunk=1)


def latents(seed=0, t=5):
    return torch.randn(1, 16, t, 8, 12, generator=torch.Generator().manual_seed(seed)).cuda()


def test_blocks_are_bit_identical_to_the_whole_run_with_the_same_cuts(model):
    z = latents()
    whole = model.decode(z)  # chunk=1: one latent frame per model call
    with model.decode_stream() as s:
        got = torch.cat([s.push(z[:, :, i:i + 1]) for i in range(5)], 2)
    assert torch.equal(got, whole)
    with model.decode_stream() as s:  # blocks of 2 and 3, still one latent frame per call (chunk=1)
        got = torch.cat([s.push(z[:, :, :2]), s.push(z[:, :, 2:])], 2)
    assert torch.equal(got, whole)


def test_pushes_queue_on_the_caller_s_stream_and_move_between_streams(model):
    z = latents(1)
    whole = model.decode(z)
    side = torch.cuda.Stream()
    s = model.decode_stream()
    parts = [s.push(z[:, :, :1])]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        z2 = z * 1.0  # made on the side stream, not waited for by the host
        parts.append(s.push(z2[:, :, 1:3]))
    parts.append(s.push(z[:, :, 3:], stream=side))
    torch.cuda.current_stream().wait_stream(side)
    got = torch.cat(parts, 2)
    torch.cuda.synchronize()
    assert torch.equal(got, whole)


def test_uint8_frames_on_the_device_and_in_pinned_memory(model):
    z = latents(2, t=3)
    want = ((model.decode(z).float() + 1) * 127.5).round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 4, 1)
    with model.decode_stream(output="uint8") as s:
        on_device = torch.cat([s.push(z[:, :, :1]), s.push(z[:, :, 1:])], 1)
    assert on_device.device.type == "cuda" and on_device.dtype == torch.uint8
    assert on_device.shape == (1, 9, 64, 96, 3)
    assert torch.equal(on_device, want)
    with model.decode_stream(output="uint8", pinned=True) as s:
        host = [s.push(z[:, :, :1]), s.push(z[:, :, 1:])]
        torch.cuda.current_stream().synchronize()
    assert all(h.device.type == "cpu" and h.is_pinned() for h in host)
    assert torch.equal(torch.cat(host, 1), want.cpu())


def test_sessions_from_threads_each_on_its_own_stream(model):
    clips = [latents(10 + k) for k in range(6)]
    wholes = [model.decode(c) for c in clips]
    results, errors = {}, []

    def run(k):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream), model.decode_stream() as s:
                results[k] = torch.cat([s.push(clips[k][:, :, i:i + 1]) for i in range(5)], 2)
            stream.synchronize()
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(clips))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, whole in enumerate(wholes):
        assert torch.equal(results[k], whole), k


def test_state_bytes_is_what_the_session_holds_on_the_device(model):
    z = latents(3, t=2)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    s = model.decode_stream()
    out = s.push(z)
    del out
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - base
    state = s.state_bytes
    assert state > 0
    assert held >= state  # the cache lives on the device ...
    s.close()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - base <= held - state  # ... and goes with the session
