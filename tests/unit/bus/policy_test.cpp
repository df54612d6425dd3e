// The shipped system bus policy (systemd/org.spite.Daemon1.conf) on a private bus built from the
// machine's system.conf: who may own the name, who may call what.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "bus_client.hpp"

using namespace spite;
using namespace spite::test;

namespace {

std::string shipped_policy() {
  const auto bytes = read_file(SPITE_DBUS_POLICY);
  return {bytes.begin(), bytes.end()};
}

std::string user_name() {
  const passwd* pw = ::getpwuid(::getuid());
  return pw != nullptr ? pw->pw_name : std::to_string(::getuid());
}

// The policy file, and when the test does not run as root (whom the policy lets own the name)
// a second file that lets this user own it, as user spite would in production.
std::vector<private_bus::file> policies() {
  std::vector<private_bus::file> files = {{"org.spite.Daemon1.conf", shipped_policy()}};
  if (::getuid() != 0) {
    files.push_back({"test-owner.conf", "<busconfig><policy user=\"" + user_name() +
                                            "\"><allow own=\"org.spite.Daemon1\"/></policy></busconfig>\n"});
  }
  return files;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    if (::access((dirs.substr(start, end - start) + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// busctl run as an unprivileged user (nobody, no supplementary groups) when we are root, else as
// ourselves; nullopt when that cannot be done here.
std::optional<process_result> unprivileged_busctl(const private_bus& bus, std::vector<std::string> args) {
  if (!on_path("busctl")) return std::nullopt;
  std::vector<std::string> argv;
  if (::getuid() == 0) {
    if (!on_path("setpriv")) return std::nullopt;
    argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  }
  argv.push_back("busctl");
  argv.push_back("--address=" + bus.address());
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv);
}

}  // namespace

TEST_CASE("bus: system policy lets root own the name and keeps LoadModel for root and group spite", "[bus]") {
  private_bus dbus(private_bus::kind::system, policies());
  fake_daemon daemon;
  auto server = bus::daemon_bus::connect({.user_bus = false}, daemon.callbacks());
  INFO(describe(server));
  REQUIRE(server.ok());

  bus_client client(dbus);
  CHECK(client.get<std::string>("Version") == "0.1.0-test");
  CHECK(client.call_on("org.freedesktop.DBus.Properties", "GetAll", std::string(bus::interface_name)).empty());
  CHECK(client.call_on("org.freedesktop.DBus.Introspectable", "Introspect").empty());
  CHECK(client.call_on("org.freedesktop.DBus.Peer", "Ping").empty());

  if (::getuid() == 0) {
    CHECK(client.call("LoadModel", std::string("tiny"), std::string("/m/tiny.gguf")).empty());
    CHECK(client.call("UnloadModel", std::string("tiny")).empty());
    CHECK(client.call("Reload").empty());
    CHECK(daemon.recorded() == std::vector<std::string>{"load tiny /m/tiny.gguf", "unload tiny", "reload"});
  } else {
    WARN("not root: the calls root may make are not checked (the policy lets only root own the name)");
  }

  // Someone outside root and group spite.
  const auto denied = unprivileged_busctl(
      dbus, {"call", bus::service_name, bus::object_path, bus::interface_name, "LoadModel", "ss", "evil", "/tmp/evil.gguf"});
  if (!denied) {
    WARN("busctl or setpriv missing: the unprivileged caller is not checked");
  } else {
    INFO(denied->out << denied->err);
    CHECK(denied->exit_code != 0);
    CHECK_THAT(denied->err, Catch::Contains("Access denied") || Catch::Contains("AccessDenied"));
    for (const char* member : {"UnloadModel", "Reload"}) {
      std::vector<std::string> args = {"call", bus::service_name, bus::object_path, bus::interface_name, member};
      if (std::string(member) == "UnloadModel") args.insert(args.end(), {"s", "tiny"});
      const auto r = unprivileged_busctl(dbus, args);
      INFO(member << ": " << r->err);
      CHECK(r->exit_code != 0);
    }
    const auto read = unprivileged_busctl(
        dbus, {"get-property", bus::service_name, bus::object_path, bus::interface_name, "State"});
    INFO(read->err);
    CHECK(read->exit_code == 0);
    CHECK(read->out == "s \"starting\"\n");
    const auto all = unprivileged_busctl(dbus, {"introspect", bus::service_name, bus::object_path});
    CHECK(all->exit_code == 0);
    if (::getuid() == 0) {
      CHECK(daemon.recorded().size() == 3);
    } else {
      CHECK(daemon.recorded().empty());
    }
  }
}

TEST_CASE("bus: a system bus without the policy refuses the name with a readable message", "[bus]") {
  private_bus dbus(private_bus::kind::system);
  fake_daemon daemon;
  auto server = bus::daemon_bus::connect({.user_bus = false}, daemon.callbacks());
  REQUIRE_FALSE(server.ok());
  INFO(server.err().message);
  CHECK(server.err().code == errc::io);
  CHECK_THAT(server.err().message,
             Catch::StartsWith("cannot own org.spite.Daemon1 on the D-Bus system bus at " + dbus.address() + ": "));
  CHECK(server.err().message.find('\n') == std::string::npos);
}

TEST_CASE("bus: system policy lets members of group spite call LoadModel", "[bus]") {
  // dbus-daemon looks a caller's groups up in the user database, and this machine need not have
  // a group spite: the shipped policy is used with its group renamed to nobody's own group.
  if (::getuid() != 0) {
    WARN("not root: cannot call as another user, the group rule is not checked");
    return;
  }
  const group* nobody_group = ::getgrgid(65534);
  REQUIRE(nobody_group != nullptr);
  std::string policy = shipped_policy();
  const std::string spite_group = "group=\"spite\"";
  REQUIRE(policy.find(spite_group) != std::string::npos);
  for (std::size_t at; (at = policy.find(spite_group)) != std::string::npos;) {
    policy.replace(at, spite_group.size(), "group=\"" + std::string(nobody_group->gr_name) + "\"");
  }
  private_bus dbus(private_bus::kind::system, {{"org.spite.Daemon1.conf", policy}});
  fake_daemon daemon;
  auto server = bus::daemon_bus::connect({.user_bus = false}, daemon.callbacks());
  INFO(describe(server));
  REQUIRE(server.ok());

  const auto load = unprivileged_busctl(
      dbus, {"call", bus::service_name, bus::object_path, bus::interface_name, "LoadModel", "ss", "tiny", "/m/tiny.gguf"});
  if (!load) {
    WARN("busctl or setpriv missing: the group rule is not checked");
    return;
  }
  INFO(load->err);
  CHECK(load->exit_code == 0);
  const auto reload = unprivileged_busctl(dbus, {"call", bus::service_name, bus::object_path, bus::interface_name, "Reload"});
  CHECK(reload->exit_code == 0);
  CHECK(daemon.recorded() == std::vector<std::string>{"load tiny /m/tiny.gguf", "reload"});
}
