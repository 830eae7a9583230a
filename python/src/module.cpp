// The extension module _vaecodec: the engine's models on torch tensors (python/vaecodec/ wraps it).
#include <torch/extension.h>

#include <pybind11/stl.h>

#include <exception>
#include <optional>
#include <string>

#include <c10/util/Exception.h>

#include "core/error.h"
#include "core/error_text.h"
#include "core/models/registry.h"
#include "model.h"

namespace py = pybind11;

namespace vaecodec::python {
namespace {

// The one line of an error (core/error_text.h); LibTorch's messages carry a C++ stack after it.
std::string first_line(const std::string& text) {
  const std::string line = core::first_line(text);
  return line.empty() ? "unknown error" : line;
}

// Note [Errors in Python]
// What the CLI prints as its one error line becomes a Python exception with that line: what the caller asked
// for that cannot work (a wrong shape, a budget that no plan meets, an unknown preset: vaecodec::UsageError)
// is a ValueError; a run or a load that fails (a damaged weights file, out of memory, LibTorch stopping) is a
// RuntimeError, LibTorch's message cut to its first line (the CLI's "LibTorch: ..."), never its C++ stack.
// Wrong types (an integer tensor) are TypeErrors, raised before the engine is called.
[[noreturn]] void raise_python(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const UsageError& e) {
    throw py::value_error(first_line(e.what()));
  } catch (const c10::OutOfMemoryError& e) {
    throw std::runtime_error("out of memory (" + first_line(e.msg()) +
                             "); give a smaller budget (vram= or a preset=), or free memory held by other "
                             "tensors");
  } catch (const c10::Error& e) {
    throw std::runtime_error("LibTorch: " + first_line(e.msg()));
  } catch (const std::exception& e) {
    throw std::runtime_error(first_line(e.what()));
  }
}

// Runs `work` without the GIL (the engine takes seconds; other Python threads go on), turning its
// exceptions into Python's once the GIL is back.
template <typename Work>
auto without_gil(Work&& work) -> decltype(work()) {
  std::exception_ptr error;
  decltype(work()) result;
  {
    py::gil_scoped_release release;
    try {
      result = work();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) raise_python(error);
  return result;
}

// What the binding checks before the engine sees a tensor: a floating-point tensor (TypeError otherwise) on
// the CPU or the model's device (ValueError otherwise).
void check_tensor(const Model& model, const torch::Tensor& t, const char* what, const char* op) {
  if (!t.defined()) throw py::type_error(std::string(op) + " expects a tensor of " + what);
  if (!t.is_floating_point())
    throw py::type_error(std::string(op) + " expects a floating-point tensor of " + what + ", got " +
                         std::string(c10::toString(t.scalar_type())));
  if (!t.device().is_cpu() && t.device() != model.device())
    throw py::value_error(std::string(op) + ": the tensor is on " + t.device().str() + ", the model on " +
                          model.device().str() + " (give it on the CPU or on the model's device)");
}

LoadOptions load_options(const std::string& device, const std::string& dtype, const std::string& vram,
                         const std::string& preset, const std::string& conv, bool autotune, int64_t chunk,
                         const std::string& family, const std::string& tile,
                         std::optional<int64_t> tile_overlap, std::optional<int64_t> norm_context,
                         const std::string& tile_norms) {
  return {device, dtype,  vram, preset,       conv,         autotune,
          chunk,  family, tile, tile_overlap, norm_context, tile_norms};
}

}  // namespace
}  // namespace vaecodec::python

PYBIND11_MODULE(_vaecodec, m) {
  using namespace vaecodec::python;
  m.doc() = "vaecodec's engine on torch tensors; use the vaecodec package, which wraps this module";

  py::class_<Model>(m, "Model")
      .def("encode",
           [](Model& self, const torch::Tensor& video) {
             check_tensor(self, video, "frames", "encode");
             return without_gil([&] { return self.encode(video); });
           })
      .def("decode",
           [](Model& self, const torch::Tensor& latents) {
             check_tensor(self, latents, "latents", "decode");
             return without_gil([&] { return self.decode(latents); });
           })
      .def(
          "stream",
          [](Model& self, const std::string& op, int64_t chunk) {
            const vaecodec::core::Op parsed =
                op == "encode"   ? vaecodec::core::Op::kEncode
                : op == "decode" ? vaecodec::core::Op::kDecode
                                 : throw py::value_error("a stream encodes or decodes, not " + op);
            return without_gil([&] { return self.stream(parsed, chunk); });
          },
          py::arg("op"), py::arg("chunk"), py::keep_alive<0, 1>())
      .def("plan", [](Model& self, const std::vector<int64_t>& shape,
                      const std::string& op) { return without_gil([&] { return self.plan(shape, op); }); })
      .def_property_readonly("family", [](const Model& self) { return self.info().family; })
      .def_property_readonly("config_json", [](const Model& self) { return self.info().config.dump(); })
      .def_property_readonly("latent_channels", [](const Model& self) { return self.info().latent_channels; })
      .def_property_readonly("spatial_factor", [](const Model& self) { return self.info().spatial_factor; })
      .def_property_readonly("temporal_factor", [](const Model& self) { return self.info().temporal_factor; })
      .def_property_readonly("latent_scale", [](const Model& self) { return self.info().latent_scale; })
      .def_property_readonly("latent_mean", [](const Model& self) { return self.info().latent_mean; })
      .def_property_readonly("latent_std", [](const Model& self) { return self.info().latent_std; })
      .def_property_readonly("device", [](const Model& self) { return self.device().str(); })
      .def_property_readonly("dtype_name",
                             [](const Model& self) { return std::string(c10::toString(self.dtype())); })
      .def_property_readonly("fp8", &Model::fp8)
      .def_property_readonly("budget_bytes", &Model::budget_bytes);

  // Note [Streaming sessions] in core/session.h; python/vaecodec/stream.py wraps it.
  py::class_<Stream>(m, "Stream")
      .def("push",
           [](Stream& self, const torch::Tensor& block) {
             check_tensor(self.model(), block,
                          self.session().op() == vaecodec::core::Op::kEncode ? "frames" : "latents", "push");
             return without_gil([&] { return self.push(block); });
           })
      .def("finish", [](Stream& self) { return without_gil([&] { return self.finish(); }); })
      .def(
          "clone", [](const Stream& self) { return without_gil([&] { return self.clone(); }); },
          py::keep_alive<0, 1>())
      .def("reset",
           [](Stream& self) {
             without_gil([&] {
               self.session().reset();
               return 0;
             });
           })
      .def_property_readonly("state_bytes", [](Stream& self) { return self.session().state_bytes(); })
      .def_property_readonly("pending_frames", [](Stream& self) { return self.session().pending_frames(); })
      .def_property_readonly("frames_in", [](Stream& self) { return self.session().frames_in(); })
      .def_property_readonly("frames_out", [](Stream& self) { return self.session().frames_out(); });

  m.def(
      "load_path",
      [](const std::string& path, const std::string& device, const std::string& dtype,
         const std::string& vram, const std::string& preset, const std::string& conv, bool autotune,
         int64_t chunk, const std::string& family, const std::string& tile,
         std::optional<int64_t> tile_overlap, std::optional<int64_t> norm_context,
         const std::string& tile_norms) {
        const LoadOptions options = load_options(device, dtype, vram, preset, conv, autotune, chunk, family,
                                                 tile, tile_overlap, norm_context, tile_norms);
        return without_gil([&] { return Model::from_path(path, options); });
      },
      py::arg("path"), py::arg("device"), py::arg("dtype"), py::arg("vram"), py::arg("preset"),
      py::arg("conv"), py::arg("autotune"), py::arg("chunk"), py::arg("family"), py::arg("tile"),
      py::arg("tile_overlap"), py::arg("norm_context"), py::arg("tile_norms"));
  m.def(
      "load_tensors",
      [](std::map<std::string, torch::Tensor> tensors, const std::string& config_json,
         const std::string& device, const std::string& dtype, const std::string& vram,
         const std::string& preset, const std::string& conv, bool autotune, int64_t chunk,
         const std::string& family, const std::string& tile, std::optional<int64_t> tile_overlap,
         std::optional<int64_t> norm_context, const std::string& tile_norms) {
        const LoadOptions options = load_options(device, dtype, vram, preset, conv, autotune, chunk, family,
                                                 tile, tile_overlap, norm_context, tile_norms);
        return without_gil([&] { return Model::from_tensors(std::move(tensors), config_json, options); });
      },
      py::arg("tensors"), py::arg("config_json"), py::arg("device"), py::arg("dtype"), py::arg("vram"),
      py::arg("preset"), py::arg("conv"), py::arg("autotune"), py::arg("chunk"), py::arg("family"),
      py::arg("tile"), py::arg("tile_overlap"), py::arg("norm_context"), py::arg("tile_norms"));
  m.def("families", [] { return vaecodec::core::model_family_names(); });
  m.def("version", [] { return std::string(VAECODEC_VERSION); });
}
