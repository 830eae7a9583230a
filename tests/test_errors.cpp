// Note [One-line errors]: what LibTorch's exceptions look like to the user.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "app/errors.h"
#include "core/error.h"

namespace vaecodec::test {
namespace {

template <typename F>
std::string line_of(F&& f) {
  try {
    f();
  } catch (...) {
    return app::error_line(std::current_exception());
  }
  return "(nothing thrown)";
}

}  // namespace

TEST_CASE("errors: LibTorch's assertions and paragraphs reach the user as one line", "[reliability]") {
  const std::string assertion = line_of([] { TORCH_INTERNAL_ASSERT(false, "tensor rank 4 is not 5"); });
  CHECK(assertion ==
        "LibTorch stopped on an internal check (tensor rank 4 is not 5); the input or the weights may be "
        "malformed, or try the other --device");

  const std::string bare = line_of([] { TORCH_INTERNAL_ASSERT(1 + 1 == 3); });
  CHECK_THAT(bare, Catch::StartsWith("LibTorch stopped on an internal check;"));

  const std::string paragraph =
      line_of([] { TORCH_CHECK(false, "what went wrong\n\nwhat the library thinks"); });
  CHECK(paragraph == "LibTorch: what went wrong");

  // A real operator's complaint.
  const std::string shapes = line_of([] { (void)torch::ones({2, 3}).matmul(torch::ones({2, 3})); });
  CHECK_THAT(shapes, Catch::StartsWith("LibTorch: mat1 and mat2 shapes cannot be multiplied"));
  CHECK(shapes.find('\n') == std::string::npos);

  for (const std::string& line : {assertion, bare, paragraph, shapes}) {
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.find("please report a bug") == std::string::npos);
    CHECK(line.find(".cpp") == std::string::npos);
  }
  CHECK(line_of([] { throw Error("x.mp4: cannot open input"); }) == "x.mp4: cannot open input");
}

}  // namespace vaecodec::test
