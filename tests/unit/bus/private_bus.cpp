#include "private_bus.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <thread>

namespace spite::test {

namespace {

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) FAIL("cannot write " << path.string());
}

std::string read_text(const std::filesystem::path& path) {
  const auto bytes = read_file(path);
  return {bytes.begin(), bytes.end()};
}

}  // namespace

std::string system_bus_config() {
  const std::filesystem::path conf = "/usr/share/dbus-1/system.conf";
  if (!std::filesystem::exists(conf)) FAIL(conf.string() << " is missing (install dbus-daemon)");
  return read_text(conf);
}

private_bus::private_bus(kind k, const std::vector<file>& policies) {
  const std::string socket = (dir_ / "bus").string();
  std::vector<std::string> argv = {"dbus-daemon", "--nofork", "--nopidfile", "--print-address"};
  if (k == kind::session) {
    argv.insert(argv.begin() + 1, {"--session", "--address=unix:path=" + socket});
    variable_ = "DBUS_SESSION_BUS_ADDRESS";
  } else {
    // The machine's policy, listening here, run by us, with only the given policy files added.
    std::string conf = system_bus_config();
    const auto drop = [&conf](const char* pattern) { conf = std::regex_replace(conf, std::regex(pattern), ""); };
    drop(R"(<user>[^<]*</user>)");
    drop(R"(<pidfile>[^<]*</pidfile>)");
    drop(R"(<fork\s*/>)");
    drop(R"(<syslog\s*/>)");
    drop(R"(<include\s[^>]*>[^<]*</include>)");
    drop(R"(<include>[^<]*</include>)");
    drop(R"(<includedir>[^<]*</includedir>)");
    conf = std::regex_replace(conf, std::regex(R"(<listen>[^<]*</listen>)"), "<listen>unix:path=" + socket + "</listen>");
    const auto policy_dir = dir_ / "system.d";
    std::filesystem::create_directory(policy_dir);
    for (const auto& f : policies) write_text(policy_dir / f.name, f.content);
    const auto end = conf.rfind("</busconfig>");
    REQUIRE(end != std::string::npos);
    conf.insert(end, "<includedir>" + policy_dir.string() + "</includedir>\n");
    write_text(dir_ / "system.conf", conf);
    argv.insert(argv.begin() + 1, "--config-file=" + (dir_ / "system.conf").string());
    variable_ = "DBUS_SYSTEM_BUS_ADDRESS";
  }
  const auto log = dir_ / "dbus-daemon.log";
  daemon_ = std::make_unique<background_process>(argv, log.string());
  // The address is printed once the bus listens.
  for (int i = 0; i < 500 && address_.empty(); ++i) {
    const std::string text = read_text(log);
    if (text.find("unix:") != std::string::npos && text.find('\n') != std::string::npos) {
      address_ = "unix:path=" + socket;
      break;
    }
    if (!daemon_->running()) FAIL("dbus-daemon exited: " << text);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (address_.empty()) FAIL("dbus-daemon did not start within 5 s: " << read_text(log));
  if (const char* old = std::getenv(variable_.c_str())) previous_ = old;
  ::setenv(variable_.c_str(), address_.c_str(), 1);
}

private_bus::~private_bus() {
  if (previous_) {
    ::setenv(variable_.c_str(), previous_->c_str(), 1);
  } else {
    ::unsetenv(variable_.c_str());
  }
  daemon_.reset();
}

std::unique_ptr<sdbus::IConnection> private_bus::connect() const {
  return sdbus::createSessionBusConnectionWithAddress(address_);
}

}  // namespace spite::test
