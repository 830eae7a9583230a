#include "app/record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <iostream>

#include "core/error.h"

namespace vaecodec::app {
namespace {

const char* status_name(InputRecord::Status status) {
  switch (status) {
    case InputRecord::Status::kOk:
      return "ok";
    case InputRecord::Status::kFailed:
      return "failed";
    case InputRecord::Status::kSkipped:
      return "skipped";
  }
  return "unknown";
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

// Now as UTC ISO 8601 with milliseconds: lines of several manifests can be put back in order.
std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  char with_millis[40];
  std::snprintf(with_millis, sizeof(with_millis), "%s.%03dZ", text, static_cast<int>(millis));
  return with_millis;
}

std::vector<std::string>& stored_command_line() {
  static std::vector<std::string> argv;
  return argv;
}

}  // namespace

void set_command_line(std::vector<std::string> argv) {
  stored_command_line() = std::move(argv);
}

const std::vector<std::string>& command_line() {
  return stored_command_line();
}

RecordLog::RecordLog(Options options) : options_(std::move(options)), host_(host_name()) {
  if (options_.manifest.empty()) return;
  fd_ = ::open(options_.manifest.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open manifest " + options_.manifest + ": " + std::strerror(errno));
}

RecordLog::~RecordLog() {
  if (fd_ >= 0) ::close(fd_);
}

nlohmann::json RecordLog::to_json(const InputRecord& r) const {
  return {{"input", r.input.string()},
          {"output", r.output.string()},
          {"status", status_name(r.status)},
          {"seconds", r.seconds},
          {"frames", r.frames},
          {"host", host_},
          {"device", r.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.device)},
          {"error",
           r.status == InputRecord::Status::kFailed ? nlohmann::json(r.error) : nlohmann::json(nullptr)}};
}

void RecordLog::write(const InputRecord& record, const nlohmann::json& summary) {
  const nlohmann::json fields = to_json(record);
  if (options_.json_lines) {
    nlohmann::json line = options_.summary_keys;
    if (summary.is_object()) line.update(summary);
    line.update(fields);
    std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
  if (fd_ < 0) return;
  nlohmann::json line = fields;
  line["time"] = utc_now();
  line["command"] = options_.command;
  line["shard"] = options_.shard.empty() ? nlohmann::json(nullptr) : nlohmann::json(options_.shard);
  line["argv"] = options_.argv;
  // One write() of the whole line on an O_APPEND file: lines of tasks sharing the manifest do not interleave
  // (Note [Shards]). A short write is an error, not something to finish with a second write.
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const ssize_t written = ::write(fd_, text.data(), text.size());
  if (written != static_cast<ssize_t>(text.size()))
    throw Error("cannot append to manifest " + options_.manifest + ": " +
                (written < 0 ? std::strerror(errno) : "short write"));
}

}  // namespace vaecodec::app
