// spite::config errors: each names the file, line and key, with the exact message.
#include <catch2/catch.hpp>

#include "config_fixture.hpp"
#include "spite/config/config.hpp"

namespace fs = std::filesystem;
using spite::errc;
using spite::test::config_dir;

namespace {

// Writes `text` as <dir>/spite.toml, loads it and returns the error (failing if it loads).
spite::error load_error(const config_dir& dir, std::string_view text) {
  const auto path = dir.write("spite.toml", text);
  auto c = spite::config::load_config(path);
  REQUIRE_FALSE(c.ok());
  return c.err();
}

}  // namespace

TEST_CASE("config errors name file, line and key", "[config][errors]") {
  config_dir dir;
  const std::string f = (dir.root / "spite.toml").string();

  SECTION("bad TOML syntax keeps line and column") {
    const auto e = load_error(dir, "[server]\nport = = 1\n");
    CHECK(e.code == errc::malformed);
    CHECK_THAT(e.message, Catch::StartsWith(f + ":2:8: TOML syntax error: "));
  }
  SECTION("a duplicate key is a syntax error") {
    const auto e = load_error(dir, "[server]\nport = 1\nport = 2\n");
    CHECK_THAT(e.message, Catch::StartsWith(f + ":3:"));
  }
  SECTION("wrong type") {
    const auto e = load_error(dir, "[server]\nport = \"80\"\n");
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.message == f + ":2: [server] port: expected an integer, got a string");
  }
  SECTION("a table where a value belongs") {
    const auto e = load_error(dir, "server = 1\n");
    CHECK(e.message == f + ":1: [server]: expected a table, got an integer");
  }
  SECTION("out of range") {
    const auto e = load_error(dir, "\n# comment\n[server]\nport = 70000\n");
    CHECK(e.code == errc::out_of_range);
    CHECK(e.message == f + ":4: [server] port: 70000 is out of range 1..65535");
  }
  SECTION("float out of range") {
    const auto e = load_error(dir, "[sampling]\ntop_p = 0\n");
    CHECK(e.message == f + ":2: [sampling] top_p: 0 is out of range (0, 1]");
    const auto e2 = load_error(dir, "[sampling]\ntemperature = 7.5\n");
    CHECK(e2.message == f + ":2: [sampling] temperature: 7.5 is out of range 0..5");
  }
  SECTION("unknown key with a suggestion") {
    const auto e = load_error(dir, "[server]\nhost = \"::1\"\nprot = 8080\n");
    CHECK(e.message == f + ":3: [server] prot: unknown key, did you mean \"port\"?");
  }
  SECTION("unknown key without a suggestion") {
    const auto e = load_error(dir, "[inference]\nflash_attention = true\n");
    CHECK(e.message == f + ":2: [inference] flash_attention: unknown key");
  }
  SECTION("unknown table with a suggestion") {
    const auto e = load_error(dir, "[sever]\nport = 1\n");
    CHECK(e.message == f + ":1: [sever]: unknown table, did you mean [server]?");
  }
  SECTION("the first problem in the file is the one reported") {
    const auto e = load_error(dir, "[sampling]\ntopk = 1\n[log]\nlevle = \"info\"\n[control]\nmode = \"0666\"\n");
    CHECK(e.message == f + ":2: [sampling] topk: unknown key, did you mean \"top_k\"?");
    const auto e2 = load_error(dir, "[server]\nzzz = 1\naaa = 2\n");
    CHECK(e2.message == f + ":2: [server] zzz: unknown key");
    const auto e3 = load_error(dir, "[models]\n");
    CHECK(e3.message == f + ":1: [models]: unknown table, did you mean [model]?");
  }
  SECTION("unknown top-level key") {
    const auto e = load_error(dir, "port = 1\n");
    CHECK(e.message == f + ":1: \"port\": unknown key");
  }
  SECTION("unknown key inside [[model]]") {
    const auto e = load_error(dir, "[[model]]\nname = \"a\"\npath = \"a.gguf\"\npreloda = false\n");
    CHECK(e.message == f + ":4: [[model]] #1 preloda: unknown key, did you mean \"preload\"?");
  }
  SECTION("duplicate model name") {
    const auto e = load_error(dir, R"([[model]]
name = "a"
path = "a.gguf"

[[model]]
name = "a"
path = "b.gguf"
)");
    CHECK(e.message == f + ":6: [[model]] #2 name: duplicate model name \"a\" (first at line 1)");
  }
  SECTION("invalid model name") {
    const auto e = load_error(dir, "[[model]]\nname = \"a b\"\npath = \"a.gguf\"\n");
    CHECK(e.message == f + ":2: [[model]] #1 name: \"a b\" is not a valid model name ([A-Za-z0-9._:-], 1 to 64)");
  }
  SECTION("missing model path") {
    const auto e = load_error(dir, "\n[[model]]\nname = \"a\"\n");
    CHECK(e.message == f + ":2: [[model]] #1 path: is required");
  }
  SECTION("missing model name in [[model]]") {
    const auto e = load_error(dir, "[[model]]\npath = \"a.gguf\"\n");
    CHECK(e.message == f + ":1: [[model]] #1 name: is required");
  }
  SECTION("missing path in the brief's [model] form") {
    const auto e = load_error(dir, "[model]\nname = \"a\"\n");
    CHECK(e.message == f + ":1: [model] path: is required");
  }
  SECTION("world-accessible control socket") {
    const auto e = load_error(dir, "[control]\nmode = \"0666\"\n");
    CHECK(e.message == f + ":2: [control] mode: 0666 gives permissions to others; the control socket "
                           "must not be world-accessible (use 0660 and a group)");
    const auto e2 = load_error(dir, "[control]\nmode = 0o701\n");
    CHECK_THAT(e2.message, Catch::StartsWith(f + ":2: [control] mode: 0701 gives permissions to others"));
    const auto e3 = load_error(dir, "[control]\nmode = \"rw-rw----\"\n");
    CHECK(e3.message == f + ":2: [control] mode: \"rw-rw----\" is not an octal mode such as \"0660\"");
  }
  SECTION("a decimal mode is out of range") {
    const auto e = load_error(dir, "[control]\nmode = 660\n");
    CHECK(e.message == f + ":2: [control] mode: 660 is not a permission mode within 0777 (write it as \"0660\" or 0o660)");
  }
  SECTION("control socket path too long for a unix socket") {
    const auto e = load_error(dir, "[control]\nsocket = \"/" + std::string(120, 's') + "\"\n");
    CHECK(e.message == f + ":2: [control] socket: path is longer than a unix socket allows (107 bytes)");
  }
  SECTION("api_key_file missing") {
    const auto e = load_error(dir, "[server]\napi_key_file = \"keys.txt\"\n");
    CHECK(e.code == errc::io);
    CHECK(e.message == f + ":2: [server] api_key_file: " + (dir.root / "keys.txt").string() +
                           ": cannot open: No such file or directory");
  }
  SECTION("api_key_file with a bad key") {
    dir.write("keys.txt", "# comment\ngood-key\nbad key\n");
    const auto e = load_error(dir, "[server]\napi_key_file = \"keys.txt\"\n");
    CHECK(e.message == f + ":2: [server] api_key_file: " + (dir.root / "keys.txt").string() +
                           ":3: api key contains a space");
    dir.write("keys.txt", "k\x01y\n");
    const auto e2 = load_error(dir, "[server]\napi_key_file = \"keys.txt\"\n");
    CHECK(e2.message == f + ":2: [server] api_key_file: " + (dir.root / "keys.txt").string() +
                            ":1: api key contains a character that is not printable ASCII");
  }
  SECTION("inline api key checked too") {
    const auto e = load_error(dir, "[server]\napi_keys = [\"ok\", \"\"]\n");
    CHECK(e.message == f + ":2: [server] api_keys[1]: must not be empty");
    const auto e2 = load_error(dir, "[server]\napi_keys = [\"ok\", \"caf\u00e9\"]\n");
    CHECK(e2.message == f + ":2: [server] api_keys[1]: api key contains a character that is not printable ASCII");
  }
  SECTION("log level with a suggestion") {
    const auto e = load_error(dir, "[log]\nlevel = \"warn\"\n");
    CHECK(e.message == f + ":2: [log] level: \"warn\" is not one of error, warning, info, debug; did you mean \"warning\"?");
  }
  SECTION("threads and its alias n_threads together") {
    const auto e = load_error(dir, "[inference]\nthreads = 2\nn_threads = 4\n");
    CHECK(e.message == f + ":3: [inference] n_threads: is an alias of threads; set only one");
  }
  SECTION("lora scale out of range and wrong element type") {
    const auto e = load_error(dir, "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nlora = [\"l.gguf:20\"]\n");
    CHECK(e.message == f + ":4: [[model]] #1 lora[0]: 20 is out of range -10..10");
    const auto e2 = load_error(dir, "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nlora = [{ scale = 1.0 }]\n");
    CHECK(e2.message == f + ":4: [[model]] #1 lora[0] path: is required");
    const auto e3 = load_error(dir, "[[model]]\nname = \"a\"\npath = \"a.gguf\"\nlora = [3]\n");
    CHECK(e3.message == f + ":4: [[model]] #1 lora[0]: expected a table {path, scale} or a string \"path[:scale]\", got an integer");
  }
  SECTION("a control character in a string") {
    const auto e = load_error(dir, "[server]\nhost = \"a\\u0000b\"\n");
    CHECK(e.message == f + ":2: [server] host: \"a\\x00b\" contains a control character");
  }
}

TEST_CASE("config bounds: file size, string length, array counts", "[config][errors]") {
  config_dir dir;
  const std::string f = (dir.root / "spite.toml").string();

  SECTION("file over 1 MiB") {
    const auto e = load_error(dir, std::string((1u << 20) + 1, '\n'));
    CHECK(e.code == errc::out_of_range);
    CHECK(e.message == f + ": larger than the limit of 1048576 bytes");
  }
  SECTION("string over 4 KiB") {
    const auto e = load_error(dir, "[server]\nhost = \"" + std::string(4097, 'h') + "\"\n");
    CHECK(e.message == f + ":2: [server] host: longer than 4096 bytes");
  }
  SECTION("more than 64 api keys") {
    std::string keys = "[server]\napi_keys = [";
    for (int i = 0; i < 65; ++i) keys += "\"k" + std::to_string(i) + "\",";
    const auto e = load_error(dir, keys + "]\n");
    CHECK(e.message == f + ":2: [server] api_keys: 65 entries, at most 64");
  }
  SECTION("more than 64 api keys with the file's") {
    std::string lines;
    for (int i = 0; i < 64; ++i) lines += "key" + std::to_string(i) + "\n";
    dir.write("keys.txt", lines);
    const auto e = load_error(dir, "[server]\napi_keys = [\"extra\"]\napi_key_file = \"keys.txt\"\n");
    CHECK(e.message == f + ":3: [server] api_key_file: more than 64 api keys with api_keys");
  }
  SECTION("more than 256 models") {
    std::string text;
    for (int i = 0; i < 257; ++i) text += "[[model]]\nname = \"m" + std::to_string(i) + "\"\npath = \"m.gguf\"\n";
    const auto e = load_error(dir, text);
    CHECK(e.message == f + ":1: [[model]]: 257 models, at most 256");
  }
  SECTION("more than 64 kernel dirs") {
    std::string text = "[kernels]\ndirs = [";
    for (int i = 0; i < 65; ++i) text += "\"d\",";
    const auto e = load_error(dir, text + "]\n");
    CHECK(e.message == f + ":2: [kernels] dirs: 65 entries, at most 64");
  }
  SECTION("a missing config file") {
    auto c = spite::config::load_config(dir.root / "absent.toml");
    REQUIRE_FALSE(c.ok());
    CHECK(c.err().code == errc::io);
    CHECK(c.err().message == (dir.root / "absent.toml").string() + ": cannot open: No such file or directory");
  }
}

TEST_CASE("parse_config names its origin in messages", "[config][errors]") {
  auto c = spite::config::parse_config("[server]\nqueue_size = -1\n", "/etc/spite/spite.toml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.err().message == "/etc/spite/spite.toml:2: [server] queue_size: -1 is out of range 0..65536");
}
