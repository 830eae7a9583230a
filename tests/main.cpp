#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>

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
  using Catch::clara::Opt;
  session.cli(session.cli() |
              Opt(vaecodec::test::gpus_option, "count")["--gpus"](
                  "run [multi-gpu] tests on this many GPUs only (default: 2, 3, ... up to all)"));
  if (const int status = session.applyCommandLine(argc, argv)) return status;
  return session.run();
}
