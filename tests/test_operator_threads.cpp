// Note [Operator threads of a helper thread] (core/operator_threads.h): a helper thread's count of LibTorch's
// CPU threads is its own.

// LibTorch before Catch: c10 defines a CHECK macro of its own, and Catch's must be the one left.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <thread>

#include "core/operator_threads.h"

namespace vaecodec::test {

TEST_CASE("a helper thread's operator threads are its own, and the rest of the process keeps its count",
          "[threads]") {
  // LibTorch's CPU builds run their operators on OpenMP: the setter is there.
  REQUIRE(core::operator_threads_settable());
  const int before = at::get_num_threads();
  auto on_a_new_thread = [](int set) {
    int count = 0;
    std::thread([&] {
      core::set_operator_threads(set);
      count = at::get_num_threads();
    }).join();
    return count;
  };
  const int fresh = on_a_new_thread(0);  // 0: nothing set, LibTorch's choice
  REQUIRE(fresh >= 1);
  CHECK(on_a_new_thread(1) == 1);
  if (fresh > 1) CHECK(on_a_new_thread(2) == 2);
  // Neither this thread nor the next new one saw the helpers' counts.
  CHECK(on_a_new_thread(0) == fresh);
  CHECK(at::get_num_threads() == before);
}

}  // namespace vaecodec::test
