// The daemon's configuration: spite.toml parsed into plain structs with safe defaults.
//
// Every error names the file, the line and the key, e.g.
//   /etc/spite/spite.toml:12: [server] port: 70000 is out of range 1..65535
// Unknown tables and keys are errors (with a "did you mean" suggestion), so a typo is never
// silently ignored. Relative paths are resolved against the configuration file's directory.
// The documented example is config/spite.toml.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/log.hpp"
#include "spite/core/result.hpp"

namespace spite::config {

// The exit status of a daemon that refuses its configuration (sysexits.h EX_CONFIG).
inline constexpr int exit_config = 78;

// Bounds on what is read: larger inputs are refused, not truncated.
inline constexpr std::size_t max_file_bytes = 1u << 20;   // spite.toml and the api key file
inline constexpr std::size_t max_string_bytes = 4096;     // any string value or api key
inline constexpr std::size_t max_models = 256;
inline constexpr std::size_t max_api_keys = 64;           // inline and from api_key_file together
inline constexpr std::size_t max_kernel_dirs = 64;
inline constexpr std::size_t max_lora_per_model = 16;

struct server_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::uint32_t max_concurrent = 4;      // requests decoding at once, 1..1024
  std::uint32_t queue_size = 64;         // requests waiting beyond those, 0..65536
  std::vector<std::string> api_keys;     // inline keys followed by api_key_file's; empty: no auth
  std::filesystem::path api_key_file;    // resolved; empty: none
  std::uint64_t max_request_bytes = 1u << 20;  // 1 KiB..64 MiB
  std::uint32_t max_tokens = 4096;             // per request, 1..1<<20
  std::uint32_t request_timeout_s = 600;       // 1..86400
  std::uint32_t shutdown_timeout_s = 30;
  std::vector<std::string> cors_origins;       // browser origins allowed to call the API; "*": any       // SIGTERM: how long requests in flight may finish, 0..3600
};

struct control_config {
  std::filesystem::path socket;  // resolved; after parse_config never empty (default_control_socket())
  std::uint32_t mode = 0660;     // socket file permissions; nothing for "others" is allowed
  std::string group;             // empty: the daemon's group
};

struct lora_adapter {
  std::filesystem::path path;  // resolved
  float scale = 1.0f;
};

struct model_config {
  std::string name;               // [A-Za-z0-9._:-]{1,64}, unique
  std::filesystem::path path;     // resolved
  std::vector<lora_adapter> lora;
  std::uint32_t n_ctx = 0;        // 0: [inference] n_ctx, else the model's own
  bool preload = true;            // load at start-up rather than on first request
  std::int64_t keep_alive_s = 300;  // idle seconds before unloading; -1: never
  // "auto": the model's own template (ChatML when it has none); "chatml": always ChatML, e.g.
  // for a model whose template cannot be rendered; any other name: tokenizer.chat_template.<name>.
  std::string chat_template = "auto";
};

struct inference_config {
  std::uint32_t threads = 0;     // 0: one per core within the CPU set and cgroup quota
  std::uint32_t n_ctx = 0;       // 0: the model's default
  std::uint32_t batch_size = 512;
  std::uint64_t memory_limit_mib = 0;  // models must fit in this; 0: what the machine (or cgroup) has available
  bool repack_weights = true;  // copy weights into the CPU kernels' packed layouts at load time
  bool prompt_cache = true;    // reuse a finished sequence's KV for the next prompt that shares its prefix
  bool pin_threads = false;    // each compute thread on a CPU of its own
  bool swa_full = false;       // sliding-window layers keep the whole context instead of a ring
  bool flash_attn = true;      // attention as an online softmax over tiles of keys
};

struct kernels_config {
  std::vector<std::filesystem::path> dirs;  // resolved; searched before the built-in directory
};

// Server-wide defaults for requests that do not set them (same meaning as the scheduler's).
struct sampling_config {
  float temperature = 0.8f;  // 0..5; 0: greedy
  std::int32_t top_k = 40;   // 0: off
  float top_p = 0.95f;       // (0, 1]; 1: off
  float min_p = 0.05f;       // 0..1; 0: off
  float repeat_penalty = 1.0f;  // (0, 10]; 1: off
  std::optional<std::uint64_t> seed;  // unset: a fresh seed per request
};

struct daemon_config {
  std::filesystem::path origin;  // the file it came from (empty: built-in defaults)
  server_config server;
  control_config control;
  std::vector<model_config> models;
  inference_config inference;
  kernels_config kernels;
  sampling_config sampling;
  log::level log_level = log::level::info;
};

// Command-line flags that take precedence over the file.
struct overrides {
  std::optional<std::filesystem::path> model;   // --model F: the only model, named after F's stem
  std::optional<std::uint16_t> port;            // --port
  std::optional<std::filesystem::path> socket;  // --socket
  std::optional<std::string> host;              // --host
};

// $RUNTIME_DIRECTORY/spited.sock (the first directory if several), else /run/spite/spited.sock.
std::filesystem::path default_control_socket();

// The built-in defaults, with the control socket resolved; what an empty file gives.
daemon_config default_config();

// Reads and parses `path` (at most max_file_bytes).
result<daemon_config> load_config(const std::filesystem::path& path);

// Parses `text`; `origin` names it in messages and its directory anchors relative paths
// (api_key_file is read from there too).
result<daemon_config> parse_config(std::string_view text, const std::filesystem::path& origin);

// Applies flags. Relative paths in flags are taken from the current directory.
void apply_overrides(daemon_config& config, const overrides& flags);

// True for [A-Za-z0-9._:-]{1,64}.
bool valid_model_name(std::string_view name) noexcept;

// A valid model name made from a file's stem: other characters become '_', cut to 64.
std::string model_name_from_path(const std::filesystem::path& path);

}  // namespace spite::config
