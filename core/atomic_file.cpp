#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>

#include "core/error.h"

// POSIX calls rather than std::filesystem operations: the PyPI libtorch.so exports its own builds of some
// of them, which can take the place of libstdc++'s (Note [std::filesystem and libtorch] in
// tests/test_support.h).

namespace vaecodec::core {
namespace fs = std::filesystem;

namespace {

// One entry of the table of temporary files (Note [Atomic outputs]). A seqlock: `sequence` is odd while
// `path` is being written, so that a signal handler that finds it changed while copying skips the entry
// instead of removing a half-written name.
struct Slot {
  std::atomic<bool> live{false};
  std::atomic<unsigned> sequence{0};
  std::array<char, PATH_MAX> path{};
};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<unsigned>::is_always_lock_free,
              "the table is read from signal handlers");

constexpr int kSlots = 64;  // a batch has two or three temporary files at a time
Slot g_slots[kSlots];
std::mutex g_table_mutex;  // serialises the writers; the signal handler takes no lock

int enter(const fs::path& path) {
  const std::string& text = path.native();
  if (text.size() >= PATH_MAX) return -1;
  std::lock_guard<std::mutex> lock(g_table_mutex);
  for (int i = 0; i < kSlots; ++i) {
    Slot& slot = g_slots[i];
    if (slot.live.load(std::memory_order_relaxed)) continue;
    slot.sequence.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(slot.path.data(), text.c_str(), text.size() + 1);
    slot.sequence.fetch_add(1, std::memory_order_release);  // even: stable
    slot.live.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void leave(int index) {
  if (index < 0) return;
  std::lock_guard<std::mutex> lock(g_table_mutex);
  g_slots[index].live.store(false, std::memory_order_release);
}

std::atomic<unsigned> g_counter{0};

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

void remove_temporary_files() noexcept {
  char copy[PATH_MAX];
  for (Slot& slot : g_slots) {
    if (!slot.live.load(std::memory_order_acquire)) continue;
    const unsigned before = slot.sequence.load(std::memory_order_acquire);
    if (before % 2 != 0) continue;
    std::memcpy(copy, slot.path.data(), sizeof(copy));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) != before) continue;
    copy[sizeof(copy) - 1] = '\0';
    ::unlink(copy);
  }
}

int temporary_file_count() {
  int count = 0;
  for (const Slot& slot : g_slots) count += slot.live.load(std::memory_order_acquire) ? 1 : 0;
  return count;
}

TemporaryFile::TemporaryFile(fs::path path) : path_(std::move(path)), slot_(enter(path_)) {}

TemporaryFile::~TemporaryFile() {
  if (!released_) ::unlink(path_.c_str());
  leave(slot_);
}

void TemporaryFile::release() {
  released_ = true;
  leave(slot_);
  slot_ = -1;
}

std::string temporary_name(const std::string& final_name, const std::string& tag) {
  const fs::path name(final_name);
  std::string stem = name.stem().string();
  std::string ext = name.extension().string();
  const std::string middle = ".tmp-" + tag;
  // "." + stem + middle + ext <= NAME_MAX; a name whose extension alone leaves no room loses it.
  if (1 + middle.size() + ext.size() + 1 > NAME_MAX) {
    stem += ext;
    ext.clear();
  }
  const size_t room = NAME_MAX - 1 - middle.size() - ext.size();
  if (stem.size() > room) {
    size_t cut = room;
    // Back up to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(stem[cut]) & 0xC0) == 0x80) --cut;
    stem.resize(cut);
  }
  return "." + stem + middle + ext;
}

AtomicFile::AtomicFile(const fs::path& final_path) : final_(final_path) {
  const fs::path dir = final_.has_parent_path() ? final_.parent_path() : fs::path(".");
  for (int attempt = 0;; ++attempt) {
    const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(g_counter++);
    temp_.emplace(dir / temporary_name(final_.filename().string(), tag));
    const int fd = ::open(temp_->path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    const int error = errno;
    temp_->release();  // not ours: leave whatever is there alone
    temp_.reset();
    if (error != EEXIST || attempt >= 100)
      throw Error("cannot write output " + final_.string() + ": " + std::strerror(error) + " (in " +
                  dir.string() + ")");
  }
}

void AtomicFile::commit() {
  if (::rename(temp_->path().c_str(), final_.c_str()) != 0)
    throw Error("cannot rename " + temp_->path().string() + " to " + final_.string() + ": " + errno_text());
  temp_->release();
}

void write_file_atomically(const fs::path& path, std::string_view bytes) {
  AtomicFile file(path);
  const int fd = ::open(file.path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw Error("cannot write " + path.string() + ": " + errno_text());
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errno_text();
      ::close(fd);
      throw Error("cannot write " + path.string() + ": " + why);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw Error("cannot write " + path.string() + ": " + errno_text());
  file.commit();
}

}  // namespace vaecodec::core
