"""vaecodec against diffusers' own AutoencoderKLWan (Wan2.1 and Wan2.2 configs) and AutoencoderKLQwenImage, on
the CPU in float32, with tiny random models that diffusers itself initialises and saves."""

import types

import pytest
import torch

import vaecodec
import vaecodec.diffusers
from conftest import relative_error

diffusers = pytest.importorskip("diffusers")
from diffusers import AutoencoderKLQwenImage, AutoencoderKLWan  # noqa: E402
from diffusers.models.autoencoders.vae import DecoderOutput, DiagonalGaussianDistribution  # noqa: E402
from diffusers.models.modeling_outputs import AutoencoderKLOutput  # noqa: E402


def statistics(channels, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(channels, generator=g) * 0.5).tolist(), (torch.rand(channels, generator=g) + 0.5).tolist()


def tiny_wan21():
    mean, std = statistics(16, 1)
    return AutoencoderKLWan(base_dim=8, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                            temperal_downsample=[False, True, True], latents_mean=mean, latents_std=std)


def tiny_wan22():
    mean, std = statistics(48, 2)
    return AutoencoderKLWan(base_dim=8, decoder_base_dim=16, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                            temperal_downsample=[False, True, True], is_residual=True, patch_size=2,
                            scale_factor_spatial=16, in_channels=12, out_channels=12, latents_mean=mean,
                            latents_std=std)


def tiny_qwen():
    mean, std = statistics(16, 3)
    return AutoencoderKLQwenImage(base_dim=8, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                                  temperal_downsample=[False, True, True], latents_mean=mean, latents_std=std)


MAKERS = {"wan2.1": tiny_wan21, "wan2.2": tiny_wan22, "qwen-image": tiny_qwen}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def case(request, tmp_path_factory):
    torch.manual_seed(0)
    vae = MAKERS[request.param]().eval()
    folder = tmp_path_factory.mktemp(request.param)
    vae.save_pretrained(folder)
    frames = 1 if request.param == "qwen-image" else 9
    g = torch.Generator().manual_seed(4)
    video = (torch.rand(1, 3, frames, 32, 32, generator=g) * 2 - 1)
    with torch.no_grad():
        mean = vae.encode(video).latent_dist.mean
        latents = torch.randn(mean.shape, generator=g) * 2
        decoded = vae.decode(latents).sample
    return types.SimpleNamespace(name=request.param, vae=vae, folder=folder, video=video, mean=mean,
                                 latents=latents, decoded=decoded)


def test_the_saved_folder_loads_and_matches_diffusers(case):
    m = vaecodec.load(case.folder, device="cpu", dtype="fp32")
    assert m.family == ("wan2.2-vae" if case.name == "wan2.2" else "wan2.1-vae")
    assert relative_error(m.encode(case.video, normalized=False), case.mean) <= 1e-5
    assert relative_error(m.decode(case.latents, normalized=False), case.decoded) <= 1e-5
    # The folder's statistics normalize: encode's default is (mean - latents_mean) / latents_std.
    mu = torch.tensor(case.vae.config.latents_mean).view(1, -1, 1, 1, 1)
    sigma = torch.tensor(case.vae.config.latents_std).view(1, -1, 1, 1, 1)
    assert relative_error(m.encode(case.video), (case.mean - mu) / sigma) <= 1e-5


def test_accelerate_runs_diffusers_calls_on_the_engine_and_restore_puts_them_back(case):
    vae = case.vae
    handle = vaecodec.diffusers.accelerate(vae)
    assert handle.model.family.startswith("wan")
    with torch.no_grad():
        out = vae.encode(case.video)
        assert isinstance(out, AutoencoderKLOutput)
        assert isinstance(out.latent_dist, DiagonalGaussianDistribution)
        assert relative_error(out.latent_dist.mean, case.mean) <= 1e-5
        assert torch.equal(out.latent_dist.mode(), out.latent_dist.mean)
        (posterior,) = vae.encode(case.video, return_dict=False)
        assert torch.equal(posterior.mean, out.latent_dist.mean)
        dec = vae.decode(case.latents)
        assert isinstance(dec, DecoderOutput)
        assert relative_error(dec.sample, case.decoded) <= 1e-5
        (sample,) = vae.decode(case.latents, return_dict=False)
        assert torch.equal(sample, dec.sample)
        assert sample.dtype == vae.dtype and sample.device == vae.device
    handle.restore()
    assert "encode" not in vae.__dict__ and "decode" not in vae.__dict__
    with torch.no_grad():
        assert torch.equal(vae.decode(case.latents).sample, case.decoded)
    handle.restore()  # a second restore changes nothing


def test_accelerate_finds_a_pipeline_s_vae_and_drops_frames_as_diffusers_does(case):
    if case.name == "qwen-image":
        pytest.skip("an image VAE: one frame")
    pipe = types.SimpleNamespace(vae=case.vae, transformer=None)
    video = torch.cat([case.video, case.video[:, :, :2]], 2)  # 11 frames: diffusers encodes the first 9
    with vaecodec.diffusers.accelerate(pipe) as handle:
        assert handle.vae is case.vae
        with torch.no_grad():
            assert relative_error(case.vae.encode(video).latent_dist.mean, case.mean) <= 1e-5
    assert "encode" not in case.vae.__dict__


def test_accelerate_refuses_other_models():
    with pytest.raises(TypeError, match="AutoencoderKLWan"):
        vaecodec.diffusers.accelerate(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="SimpleNamespace"):
        vaecodec.diffusers.accelerate(types.SimpleNamespace(unet=None))
