#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vaecodec::app {

// One input's outcome: what --json prints as a line and what --manifest appends (Note [Shards]).
struct InputRecord {
  enum class Status { kOk, kFailed, kSkipped };
  std::filesystem::path input;
  std::filesystem::path output;
  Status status = Status::kOk;
  double seconds = 0;  // the input's run, until written or failed; 0 when skipped
  int64_t frames = 0;  // frames written (decode, roundtrip) or read (encode); 0 unless ok
  std::string device;  // where the model ran; empty when no model ran for it
  std::string error;   // the one-line message, when failed
};

// The one writer of InputRecords. Each record becomes one JSON object with the fields input, output, status
// ("ok", "failed", "skipped"), seconds, frames, host, device (null when none) and error (null unless failed).
// On stdout (--json) a run's summary is merged into it; the manifest line adds the time it was written, the
// command, its command line and shard.
class RecordLog {
 public:
  struct Options {
    bool json_lines = false;        // --json: print each record on stdout
    std::string manifest;           // --manifest FILE: append each record; empty: none
    std::string command;            // "roundtrip", "encode" or "decode"
    std::string shard;              // "K/N"; empty: not sharded
    std::vector<std::string> argv;  // the command line, for scripts/slurm/vaecodec-failed's retry
    // --json: every key a run's summary may have, null: a failed or skipped input's line has the keys of
    // an ok one (app/run_options.h, summary_template).
    nlohmann::json summary_keys = nlohmann::json::object();
  };
  // Opens (creates) the manifest for appending; throws Error naming it when that fails.
  explicit RecordLog(Options options);
  ~RecordLog();
  RecordLog(const RecordLog&) = delete;
  RecordLog& operator=(const RecordLog&) = delete;

  // Prints and appends `record`; `summary` (summary_json's object, or null) is merged into the stdout line.
  // Throws Error when the manifest line cannot be written whole.
  void write(const InputRecord& record, const nlohmann::json& summary = nullptr);

 private:
  nlohmann::json to_json(const InputRecord& record) const;

  Options options_;
  std::string host_;
  int fd_ = -1;
};

// The command line main() was given, for the manifest (set once by main before parsing).
void set_command_line(std::vector<std::string> argv);
const std::vector<std::string>& command_line();

}  // namespace vaecodec::app
