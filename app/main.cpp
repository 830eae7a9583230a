#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app/commands.h"
#include "io/log.h"

// Note [Quick exit]
// Once run_cli returns, every output is complete: files were renamed into place (or removed on failure),
// manifests were written line by line, the pipeline's threads were joined. What a normal return from main
// would still do is tear down: LibTorch's operator registry, the CUDA caching allocator handing its segments
// back one by one, the cuDNN and cuBLAS handles, the primary context. That took 0.35-0.46 s after a 720p
// file decode on an H100 (docs/benchmarks.md, "A fresh process"), a tenth of the wall clock of a short clip,
// for nothing the user sees: the driver releases the process's GPU memory when it ends either way. So the
// streams are flushed and the process ends with _Exit. Sanitizer builds return normally: their leak check
// runs at exit.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VAECODEC_QUICK_EXIT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define VAECODEC_QUICK_EXIT 0
#endif
#endif
#ifndef VAECODEC_QUICK_EXIT
#define VAECODEC_QUICK_EXIT 1
#endif

int main(int argc, char** argv) {
  const int code = vaecodec::app::run_cli(argc, argv);
  vaecodec::io::startup_note("the command is done");  // --verbose: where a short run's wall clock goes
  if (!VAECODEC_QUICK_EXIT) return code;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}
