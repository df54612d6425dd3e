// spite::config: defaults, the documented config/spite.toml, the brief's form, paths, overrides.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "config_fixture.hpp"
#include "spite/config/config.hpp"

namespace fs = std::filesystem;
using spite::test::config_dir;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Turns the "#key = value" / "#[[table]]" examples of the documented file into real lines.
std::string uncomment_examples(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' && line[1] != '#') line.erase(0, 1);
    out += line;
    out += '\n';
  }
  return out;
}

// Sets or clears an environment variable for one scope.
struct scoped_env {
  std::string name;
  std::optional<std::string> saved;
  scoped_env(const char* n, const char* value) : name(n) {
    if (const char* old = std::getenv(n)) saved = old;
    if (value != nullptr) ::setenv(n, value, 1);
    else ::unsetenv(n);
  }
  ~scoped_env() {
    if (saved) ::setenv(name.c_str(), saved->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("an empty file gives the safe defaults", "[config]") {
  config_dir dir;
  const auto path = dir.write("spite.toml", "");
  auto c = spite::config::load_config(path);
  REQUIRE(c.ok());
  CHECK(c->origin == path);
  CHECK(c->server.host == "127.0.0.1");
  CHECK(c->server.port == 8080);
  CHECK(c->server.max_concurrent == 4);
  CHECK(c->server.queue_size == 64);
  CHECK(c->server.api_keys.empty());
  CHECK(c->server.api_key_file.empty());
  CHECK(c->server.max_request_bytes == 1u << 20);
  CHECK(c->server.max_tokens == 4096);
  CHECK(c->server.request_timeout_s == 600);
  CHECK(c->control.socket == spite::config::default_control_socket());
  CHECK(c->control.mode == 0660);
  CHECK(c->control.group.empty());
  CHECK(c->models.empty());
  CHECK(c->inference.threads == 0);
  CHECK(c->inference.n_ctx == 0);
  CHECK(c->inference.batch_size == 512);
  CHECK(c->inference.repack_weights);
  CHECK(c->kernels.dirs.empty());
  CHECK(c->sampling.temperature == Approx(0.8f));
  CHECK(c->sampling.top_k == 40);
  CHECK_FALSE(c->sampling.seed.has_value());
  CHECK(c->log_level == spite::log::level::info);
  CHECK(spite::config::default_config().control.socket == spite::config::default_control_socket());
  CHECK(spite::config::exit_config == 78);
}

TEST_CASE("the default control socket follows RUNTIME_DIRECTORY", "[config]") {
  {
    scoped_env env("RUNTIME_DIRECTORY", "/run/spite-a:/run/spite-b");
    CHECK(spite::config::default_control_socket() == "/run/spite-a/spited.sock");
  }
  {
    scoped_env env("RUNTIME_DIRECTORY", nullptr);
    CHECK(spite::config::default_control_socket() == "/run/spite/spited.sock");
  }
}

TEST_CASE("the documented config/spite.toml parses as shipped", "[config]") {
  auto c = spite::config::load_config(SPITE_CONFIG_EXAMPLE);
  INFO((c.ok() ? std::string() : c.err().message));
  REQUIRE(c.ok());
  CHECK(c->server.host == "127.0.0.1");
  CHECK(c->server.port == 8080);
  CHECK(c->control.mode == 0660);
  CHECK(c->control.socket == spite::config::default_control_socket());
  REQUIRE(c->models.size() == 1);
  CHECK(c->models[0].name == "default");
  CHECK(c->models[0].path == "/var/lib/spite/models/model.gguf");
  CHECK(c->models[0].preload);
  CHECK(c->models[0].keep_alive_s == 300);
  CHECK(c->log_level == spite::log::level::info);
}

TEST_CASE("every commented example of config/spite.toml parses too", "[config]") {
  config_dir dir;
  const auto path = dir.write("etc/spite.toml", uncomment_examples(slurp(SPITE_CONFIG_EXAMPLE)));
  dir.write("etc/api_keys.txt", "# keys for the proxy\n\nkey-from-file-1\r\n  key-from-file-2  \n");
  auto c = spite::config::load_config(path);
  INFO((c.ok() ? std::string() : c.err().message));
  REQUIRE(c.ok());
  CHECK(c->server.api_keys ==
        std::vector<std::string>{"change-me-long-random-string", "key-from-file-1", "key-from-file-2"});
  CHECK(c->server.api_key_file == dir.root / "etc/api_keys.txt");
  CHECK(c->control.group == "spite");
  REQUIRE(c->models.size() == 2);
  REQUIRE(c->models[0].lora.size() == 2);
  CHECK(c->models[0].lora[0].path == "/var/lib/spite/adapters/code.gguf");
  CHECK(c->models[0].lora[0].scale == Approx(0.8f));
  CHECK(c->models[0].lora[1].path == "/var/lib/spite/adapters/style.gguf");
  CHECK(c->models[0].lora[1].scale == Approx(0.5f));
  CHECK(c->models[1].name == "small");
  CHECK(c->models[1].path == dir.root / "etc/models/small.gguf");
  CHECK_FALSE(c->models[1].preload);
  CHECK(c->sampling.seed == 42u);
}

TEST_CASE("the product brief's form: one [model] table, n_threads", "[config]") {
  config_dir dir;
  const auto path = dir.write("spite.toml", R"([server]
host        = "127.0.0.1"
port        = 8080
max_concurrent = 4

[model]
path        = "models/model.gguf"

[inference]
n_ctx       = 4096    # context length
n_threads   = 4       # CPU fallback threads
repack_weights = false

[sampling]
temperature = 1.0
top_p       = 0.95
)");
  auto c = spite::config::load_config(path);
  INFO((c.ok() ? std::string() : c.err().message));
  REQUIRE(c.ok());
  REQUIRE(c->models.size() == 1);
  CHECK(c->models[0].name == "model");
  CHECK(c->models[0].path == dir.root / "models/model.gguf");
  CHECK(c->inference.threads == 4);
  CHECK(c->inference.n_ctx == 4096);
  CHECK_FALSE(c->inference.repack_weights);
  CHECK(c->sampling.temperature == Approx(1.0f));
  CHECK(c->sampling.top_p == Approx(0.95f));
}

TEST_CASE("relative paths are taken from the config file's directory", "[config]") {
  config_dir dir;
  const auto path = dir.write("etc/spite/spite.toml", R"(
[control]
socket = "run/ctl.sock"
mode = 0o600

[[model]]
name = "rel"
path = "../models/./a.gguf"
lora = ["adapters/x.gguf", "adapters/y:z.gguf", { path = "/abs/l.gguf" }]

[[model]]
name = "abs"
path = "/srv/models/b.gguf"

[kernels]
dirs = ["kernels", "/opt/spite/kernels"]
)");
  auto c = spite::config::load_config(path);
  INFO((c.ok() ? std::string() : c.err().message));
  REQUIRE(c.ok());
  const fs::path etc = dir.root / "etc/spite";
  CHECK(c->control.socket == etc / "run/ctl.sock");
  CHECK(c->control.mode == 0600);
  REQUIRE(c->models.size() == 2);
  CHECK(c->models[0].path == dir.root / "etc/models/a.gguf");
  REQUIRE(c->models[0].lora.size() == 3);
  CHECK(c->models[0].lora[0].path == etc / "adapters/x.gguf");
  CHECK(c->models[0].lora[0].scale == 1.0f);
  CHECK(c->models[0].lora[1].path == etc / "adapters/y:z.gguf");  // ":z.gguf" is no scale
  CHECK(c->models[0].lora[2].path == "/abs/l.gguf");
  CHECK(c->models[1].path == "/srv/models/b.gguf");
  CHECK(c->kernels.dirs == std::vector<fs::path>{etc / "kernels", "/opt/spite/kernels"});
}

TEST_CASE("parse_config with a relative origin anchors paths at the current directory", "[config]") {
  auto c = spite::config::parse_config("[[model]]\nname = \"m\"\npath = \"m.gguf\"\n", "spite.toml");
  REQUIRE(c.ok());
  CHECK(c->models[0].path == fs::current_path() / "m.gguf");
}

TEST_CASE("flags override the file", "[config]") {
  config_dir dir;
  const auto path = dir.write("spite.toml", R"([server]
port = 9000
[[model]]
name = "a"
path = "a.gguf"
[[model]]
name = "b"
path = "b.gguf"
)");
  auto c = spite::config::load_config(path);
  REQUIRE(c.ok());

  spite::config::daemon_config untouched = *c;
  spite::config::apply_overrides(untouched, {});
  CHECK(untouched.server.port == 9000);
  CHECK(untouched.models.size() == 2);

  spite::config::overrides flags;
  flags.model = "some dir/Llama-3.2 1B+q4.gguf";
  flags.port = 8181;
  flags.host = "::1";
  flags.socket = "/tmp/x.sock";
  spite::config::apply_overrides(*c, flags);
  REQUIRE(c->models.size() == 1);
  CHECK(c->models[0].name == "Llama-3.2_1B_q4");
  CHECK(spite::config::valid_model_name(c->models[0].name));
  CHECK(c->models[0].path == fs::current_path() / "some dir/Llama-3.2 1B+q4.gguf");
  CHECK(c->models[0].preload);
  CHECK(c->server.port == 8181);
  CHECK(c->server.host == "::1");
  CHECK(c->control.socket == "/tmp/x.sock");
}

TEST_CASE("model names", "[config]") {
  using spite::config::valid_model_name;
  CHECK(valid_model_name("llama3:8b-instruct_q4.K"));
  CHECK_FALSE(valid_model_name(""));
  CHECK_FALSE(valid_model_name("a b"));
  CHECK_FALSE(valid_model_name("a/b"));
  CHECK_FALSE(valid_model_name(std::string(65, 'a')));
  CHECK(valid_model_name(std::string(64, 'a')));
  CHECK(spite::config::model_name_from_path("/x/.gguf") == ".gguf");
  CHECK(spite::config::model_name_from_path("/x/") == "model");
  CHECK(spite::config::model_name_from_path("/x/" + std::string(100, 'b') + ".gguf") == std::string(64, 'b'));
}
