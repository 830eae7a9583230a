#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>

#include <ATen/Context.h>

namespace vaecodec::test {

namespace {
int gpus_option = 0;
}  // namespace

// Declared in tests/gpu_support.h.
int64_t gpus_asked() {
  return gpus_option;
}

}  // namespace vaecodec::test

// Catch's own main, with one option of this program: --gpus N, the one number of GPUs that [multi-gpu] tests
// run on (Note [Tests on several GPUs] in tests/gpu_support.h; CTest's entry for N passes it).
int main(int argc, char* argv[]) {
  Catch::Session session;
  // Errors and tolerances in the failures' expansions: Catch's default prints doubles fixed to 10 decimals,
  // so an error of 3e-12 against a tolerance of 1e-12 read "0.0 <= 0.0".
  Catch::StringMaker<double>::precision = 17;
  using Catch::clara::Opt;
  session.cli(session.cli() |
              Opt(vaecodec::test::gpus_option, "count")["--gpus"](
                  "run [multi-gpu] tests on this many GPUs only (default: 2, 3, ... up to all)"));
  // VAECODEC_TEST_NAN_EMPTY=1: every tensor LibTorch makes without values starts as NaN (its deterministic
  // mode's fill), so a result that reads memory nothing wrote fails instead of passing by luck.
  if (std::getenv("VAECODEC_TEST_NAN_EMPTY")) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    at::globalContext().setDeterministicFillUninitializedMemory(true);
  }
  if (const int status = session.applyCommandLine(argc, argv)) return status;
  return session.run();
}
