#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace vaecodec::app {

// Note [Several devices]
// `--devices all | 0,1 | cuda:0,cuda:2` names the GPUs of this host that a run may use (roundtrip, encode,
// decode, bench). A batch is spread over them (Note [Batches over devices] in app/device_batch.h); `bench`
// runs its clip on each at once. Without it a run uses one device, --device's, as before.
// What is refused, with one line naming the CUDA devices that exist and exit status 2, before anything is
// loaded or written: a device that does not exist, one named twice (two workers on one GPU would share its
// memory budget, which the planner gives whole to each), `--devices` where there is no CUDA device, the CPU
// in the list (`--device cpu` runs on it), and a `--device` that says otherwise (`cpu`, or a `cuda:N` not in
// the list; `cuda` and `auto` agree with any list). One input (one output file) on several devices is split
// across them, each GPU a band of every frame (Note [Bands across devices] in core/band_exchange.h); with one
// device it runs there.

// The CUDA devices `text` names, in its order, given `cuda_count` visible CUDA devices. Throws UsageError
// (Note [Several devices]) for anything else; the message starts with "--devices TEXT".
std::vector<torch::Device> parse_devices(const std::string& text, int64_t cuda_count);

// `--devices` checked against `--device` (Note [Several devices]): throws UsageError when they disagree.
void check_device_agrees(const std::string& device, const std::vector<torch::Device>& devices,
                         int64_t cuda_count);

// "the CUDA devices here are cuda:0, cuda:1", or "there is no CUDA device here (only the CPU)".
std::string devices_here(int64_t cuda_count);

// The number of CUDA devices this process sees (0 without CUDA).
int64_t visible_cuda_devices();

// "cuda:0, cuda:1".
std::string device_list(const std::vector<torch::Device>& devices);

}  // namespace vaecodec::app
