#include "app/shard.h"

#include <charconv>
#include <cstdlib>
#include <optional>

#include "core/error.h"

namespace vaecodec::app {
namespace {

// A whole non-negative decimal number, nothing else.
std::optional<int64_t> parse_count(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

// An environment variable that must hold a number; nullopt when unset.
std::optional<int64_t> number_from(const Environment& env, const char* name) {
  const std::string text = env(name);
  if (text.empty()) return std::nullopt;
  const std::optional<int64_t> value = parse_count(text);
  if (!value) throw UsageError(std::string("--shard auto: ") + name + "=" + text + " is not a number");
  return value;
}

Shard checked(int64_t index, int64_t count, const std::string& what) {
  if (count < 1) throw UsageError(what + ": the number of shards must be at least 1");
  if (index >= count)
    throw UsageError(what + ": shard " + std::to_string(index) + " does not exist among " +
                     std::to_string(count) + " (shards are numbered 0 to " + std::to_string(count - 1) + ")");
  return {index, count};
}

Shard from_slurm(int64_t id, const Environment& env) {
  const std::optional<int64_t> min = number_from(env, "SLURM_ARRAY_TASK_MIN");
  const std::optional<int64_t> max = number_from(env, "SLURM_ARRAY_TASK_MAX");
  const std::optional<int64_t> step = number_from(env, "SLURM_ARRAY_TASK_STEP");
  const std::optional<int64_t> count = number_from(env, "SLURM_ARRAY_TASK_COUNT");
  const std::string what = "--shard auto (SLURM_ARRAY_TASK_ID=" + std::to_string(id) + ")";
  if (min && max) {
    const int64_t stride = step.value_or(1);
    if (stride < 1 || *max < *min || id < *min || id > *max || (id - *min) % stride != 0)
      throw UsageError(what + ": not a task of the range SLURM_ARRAY_TASK_MIN..MAX=" + std::to_string(*min) +
                       ".." + std::to_string(*max) + " in steps of " + std::to_string(stride));
    const int64_t tasks = (*max - *min) / stride + 1;
    if (count && *count != tasks)
      throw UsageError(what + ": the array's " + std::to_string(*count) + " task ids are not the range " +
                       std::to_string(*min) + "-" + std::to_string(*max) + ":" + std::to_string(stride) +
                       ", so a task cannot tell its shard; submit --array=0-" + std::to_string(*count - 1) +
                       " or give --shard K/N");
    return checked((id - *min) / stride, tasks, what);
  }
  if (count) return checked(id, *count, what);
  throw UsageError(what + ": neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN/MAX is set");
}

}  // namespace

std::string process_environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

Shard parse_shard(const std::string& text, int64_t shard_count, const Environment& env) {
  if (text != "auto") {
    if (shard_count != 0)
      throw UsageError(
          "--shard-count goes with --shard auto (a Kubernetes Indexed Job's JOB_COMPLETION_INDEX)");
    const size_t slash = text.find('/');
    const std::optional<int64_t> index =
        slash == std::string::npos ? std::nullopt : parse_count(text.substr(0, slash));
    const std::optional<int64_t> count =
        slash == std::string::npos ? std::nullopt : parse_count(text.substr(slash + 1));
    if (!index || !count)
      throw UsageError("--shard " + text + ": expected K/N, shard K of N counted from 0 (e.g. 0/4), or auto");
    return checked(*index, *count, "--shard " + text);
  }
  if (const std::optional<int64_t> id = number_from(env, "SLURM_ARRAY_TASK_ID")) return from_slurm(*id, env);
  if (const std::optional<int64_t> index = number_from(env, "JOB_COMPLETION_INDEX")) {
    if (shard_count <= 0)
      throw UsageError("--shard auto: JOB_COMPLETION_INDEX=" + std::to_string(*index) +
                       " needs --shard-count N, the Indexed Job's completions");
    return checked(*index, shard_count, "--shard auto (JOB_COMPLETION_INDEX=" + std::to_string(*index) + ")");
  }
  throw UsageError(
      "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm array task) nor JOB_COMPLETION_INDEX (a Kubernetes "
      "Indexed Job) is set; give --shard K/N");
}

}  // namespace vaecodec::app
