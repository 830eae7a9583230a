"""Streaming sessions: one clip encoded or decoded block by block, as a realtime generator makes it.

    with model.decode_stream() as stream:
        for block in generator:              # latents [B, C, t, h, w], a few latent frames at a time
            frames = stream.push(block)      # the frames this block completes, exactly the whole clip's
        frames = stream.finish()             # the clip ends: the frames held back (LTX-2), else none

A session keeps the clip's causal cache between pushes (Note [Streaming sessions] in core/session.h), so the
frames of any split into blocks, put together with what `finish` returns, are the whole clip's decode (or
encode). Made by `Model.decode_stream` and `Model.encode_stream`.
"""

from __future__ import annotations

import warnings
from typing import Optional

import torch

_OUTPUTS = ("float", "uint8")


class Stream:
    """One clip's session on a model: `push` blocks, get what each completes.

    decode: latents [B, C, t, h, w] -> frames [B, 3, n, H, W] in [-1, 1] (the model's dtype), or with
        output="uint8" frames [B, n, H, W, 3] in 0..255 (on the model's device, or in pinned host memory with
        pinned=True). The first block of t latent frames gives 1 + 4(t - 1) frames, every later latent frame 4
        (4: the model's temporal_factor, 8 for LTX-2). A decoder that looks ahead (LTX-2) gives fewer, none at
        first: it holds frames back (`pending_frames`) until later latents come or `finish` ends the clip.
    encode: frames [B, 3, t, H, W] in [-1, 1] -> latents [B, C, n, h, w] (float32). The first frame gives the
        first latent frame, every 4 more frames one more; the rest waits in the session (`pending_frames`).

    Work is queued on the current CUDA stream (or `stream=`) without waiting for it; the output is ready when
    that stream gets there. Many sessions may share a model, from several threads. A block the session cannot
    take raises one ValueError or TypeError and leaves the session as it was; so does a push that fails while
    it runs (out of memory: RuntimeError).

    `finish` ends the clip and returns the frames held back; without it a decoder that looks ahead never gives
    its last frames, and closing such a stream with frames held back warns.
    """

    def __init__(self, model, native, op: str, normalized: bool, output: str, pinned: bool):
        self._model = model
        self._native = native
        self.op = op
        self.normalized = bool(normalized)
        self.output = output
        self.pinned = bool(pinned)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.frames_in} in, {self.frames_out} out"
        return f"vaecodec.Stream({self.op}, {self._model.family}, {state})"

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, kind, *exc) -> None:
        self._close(warn=kind is None)  # an exception on its way out says why the clip was left

    @property
    def closed(self) -> bool:
        return self._native is None

    def _live(self):
        if self._native is None:
            raise ValueError(f"{self.op} stream: the session is closed")
        return self._native

    def push(self, block: torch.Tensor, stream: Optional[torch.cuda.Stream] = None) -> torch.Tensor:
        """Runs `block` through the model and returns what it completes (possibly no frames)."""
        native = self._live()
        if not torch.is_tensor(block):
            raise TypeError(f"{self.op} stream: push expects a tensor, got {type(block).__name__}")
        if self.op == "decode" and not self.normalized and self._model.latent_mean is not None \
                and block.is_floating_point() and block.dim() == 5 and block.size(1) == self._model.latent_channels:
            mean, std = self._model._statistics(block)
            block = (block.float() - mean) / std
        return self._run(lambda: native.push(block), stream)

    def finish(self, stream: Optional[torch.cuda.Stream] = None) -> torch.Tensor:
        """Ends the clip and returns its last frames: what a decoder that looks ahead (LTX-2) held back, shaped
        as `push`'s output; 0 frames for a causal decoder and for encode. The next push starts a new clip (of
        any frame size); until then `frames_in` and `frames_out` count the ended clip. Frames that an encode
        still waits with cannot make a latent frame: finishing then raises ValueError naming how many (push
        the last frame again until the group is complete, or `reset`), and the clip stays open. Without a
        clip, 0 frames of batch and size 0."""
        native = self._live()
        return self._run(native.finish, stream)

    def _run(self, call, stream: Optional[torch.cuda.Stream]) -> torch.Tensor:
        if stream is None:
            return self._deliver(call())
        if self._model.device.type != "cuda":
            raise ValueError(f"{self.op} stream: stream= is for a model on CUDA; this one is on {self._model.device}")
        with torch.cuda.stream(stream):
            return self._deliver(call())

    def _deliver(self, out: torch.Tensor) -> torch.Tensor:
        if self.op == "encode":
            if out.is_inference():
                out = out.clone()
            if not self.normalized and self._model.latent_mean is not None:
                mean, std = self._model._statistics(out)
                out = out * std + mean
            return out
        if self.output == "float":
            return out.clamp(-1, 1)
        frames = out.float().clamp(-1, 1).add_(1).mul_(127.5).round_().to(torch.uint8).permute(0, 2, 3, 4, 1)
        if self.pinned and frames.is_cuda:
            host = torch.empty(frames.shape, dtype=torch.uint8, pin_memory=True)
            host.copy_(frames, non_blocking=True)
            return host
        return frames.contiguous()

    def clone(self) -> "Stream":
        """An independent session at the same point of the same clip (branching, rewinding)."""
        return Stream(self._model, self._live().clone(), self.op, self.normalized, self.output, self.pinned)

    def reset(self) -> None:
        """Forgets the clip: the next push starts a new one (of any frame size)."""
        self._live().reset()

    def close(self) -> None:
        """Releases the session's state; pushing afterwards raises ValueError. Closing twice is harmless.
        Closing a decode stream that still holds frames back (`finish` not called) warns: they are lost."""
        self._close(warn=True)

    def _close(self, warn: bool) -> None:
        if self._native is None:
            return
        held = self._native.pending_frames if self.op == "decode" else 0
        self._native = None
        if warn and held:
            warnings.warn(f"decode stream: closed with {held} frames held back; call finish() before closing to "
                          f"get them", stacklevel=3)

    @property
    def state_bytes(self) -> int:
        """Device bytes the session holds between pushes (the causal cache with the frames a decoder that looks
        ahead holds back, the frames waiting)."""
        return self._live().state_bytes

    @property
    def pending_frames(self) -> int:
        """encode: frames pushed that wait for a group of 4; decode: frames the latents pushed make that the
        session holds back until later latents or `finish` (0 for a causal decoder)."""
        return self._live().pending_frames

    @property
    def frames_in(self) -> int:
        """Frames (encode) or latent frames (decode) pushed since the clip began (after `finish`, the ended
        clip's until the next push)."""
        return self._live().frames_in

    @property
    def frames_out(self) -> int:
        """Latent frames (encode) or frames (decode) returned since the clip began, `finish`'s too."""
        return self._live().frames_out


def make_stream(model, op: str, normalized: bool = True, output: str = "float", pinned: bool = False,
                chunk: int = 0) -> Stream:
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(_OUTPUTS)}, got {output!r}")
    if op == "encode" and (output != "float" or pinned):
        raise ValueError("an encode stream returns latents: output= and pinned= are for decode streams")
    if pinned and output != "uint8":
        raise ValueError("pinned=True is for output='uint8' frames")
    if pinned and model.device.type != "cuda":
        raise ValueError(f"pinned=True is for a model on CUDA; this one is on {model.device}")
    if isinstance(chunk, bool) or not isinstance(chunk, int):
        raise TypeError(f"chunk must be an integer, got {type(chunk).__name__}")
    return Stream(model, model._native.stream(op, chunk), op, normalized, output, pinned)
