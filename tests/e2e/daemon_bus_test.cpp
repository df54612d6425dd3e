// spited publishes org.spite.Daemon1: a real spited on a private session bus (--user), driven
// by a real D-Bus client: properties, LoadModel/UnloadModel/Reload, and the ModelLoaded,
// ModelUnloaded and KernelsChanged signals (the last when a kernel library appears).
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <signal.h>

#include "bus_client.hpp"
#include "daemon_support.hpp"
#include "kernel_fixtures.hpp"

using namespace spite;
using namespace spite::test;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Waits until spited owns its name on the bus.
bool wait_for_name(const private_bus& dbus, std::chrono::milliseconds timeout = 20s) {
  auto c = dbus.connect();
  auto proxy = sdbus::createProxy(*c, "org.freedesktop.DBus", "/org/freedesktop/DBus");
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    bool has = false;
    proxy->callMethod("NameHasOwner").onInterface("org.freedesktop.DBus").withArguments(std::string(bus::service_name)).storeResultsTo(has);
    if (has) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

}  // namespace

TEST_CASE("spited publishes org.spite.Daemon1: models, methods and signals", "[bus]") {
  private_bus dbus(private_bus::kind::session);
  temp_dir dir;
  const fs::path kernels = dir.path() / "kernels";
  fs::create_directories(kernels);
  notify_socket notify(dir.path() / "notify");
  background_process d({SPITED_PATH, "--port", "0", "--user", "--model", "stories=" + shared_path("models/stories260K.gguf").string(),
                        "--socket", (dir.path() / "ctl.sock").string(), "--kernels", kernels.string()},
                       (dir.path() / "log").string(),
                       {"NOTIFY_SOCKET=" + notify.path.string(), "DBUS_SESSION_BUS_ADDRESS=" + dbus.address()});
  REQUIRE(notify.wait_for("READY=1"));
  REQUIRE(wait_for_name(dbus));

  bus_client client(dbus);
  CHECK(client.get<std::string>("State") == "running");
  CHECK(client.get<std::vector<std::string>>("Models") == std::vector<std::string>{"stories"});
  CHECK_FALSE(client.get<std::string>("Version").empty());

  mailbox<std::string> loaded, unloaded;
  mailbox<std::vector<std::string>> kernels_added;
  auto& proxy = client.proxy();
  proxy.uponSignal("ModelLoaded").onInterface(bus::interface_name).call([&](const std::string& n) { loaded.put(n); });
  proxy.uponSignal("ModelUnloaded").onInterface(bus::interface_name).call([&](const std::string& n) { unloaded.put(n); });
  proxy.uponSignal("KernelsChanged")
      .onInterface(bus::interface_name)
      .call([&](std::uint64_t, const std::vector<std::string>& added, const std::vector<std::string>&,
                const std::vector<std::string>&, const std::vector<sdbus::Struct<std::string, std::string>>&) {
        kernels_added.put(added);
      });
  proxy.finishRegistration();

  // LoadModel of a file under a new name; the signal names it and Models lists it.
  CHECK(client.call("LoadModel", std::string("tiny"), fs::absolute(shared_path("models/llama-2-tiny-random.gguf")).string()) ==
        "");
  CHECK(loaded.take() == std::optional<std::string>("tiny"));
  auto models = client.get<std::vector<std::string>>("Models");
  CHECK(std::find(models.begin(), models.end(), "tiny") != models.end());
  CHECK(client.call("UnloadModel", std::string("tiny")) == "");
  CHECK(unloaded.take() == std::optional<std::string>("tiny"));
  CHECK_THAT(client.call("UnloadModel", std::string("tiny")), Catch::StartsWith("org.spite.Daemon1.Error.NotFound"));
  CHECK_THAT(client.call("LoadModel", std::string("nope"), std::string()),
             Catch::StartsWith("org.spite.Daemon1.Error.NotFound"));
  CHECK(client.call("Reload") == "");

  // A kernel library appearing in a watched directory is announced.
  install_fixture(kernels, SPITE_FIXTURE_DIR, "good_generic", "generic/generic/x86_64", "rms");
  const auto added = kernels_added.take(10s);
  REQUIRE(added.has_value());
  REQUIRE(added->size() == 1);
  CHECK_THAT(added->front(), Catch::Contains("generic/generic/x86_64"));
}

TEST_CASE("spited without a reachable bus logs one line and serves on", "[bus]") {
  temp_dir dir;
  notify_socket notify(dir.path() / "notify");
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + shared_path("models/stories260K.gguf").string(), "--socket",
                        (dir.path() / "ctl.sock").string()},
                       (dir.path() / "log").string(),
                       {"NOTIFY_SOCKET=" + notify.path.string(),
                        "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + (dir.path() / "no-bus").string()});
  REQUIRE(notify.wait_for("READY=1"));
  const auto r = run_process({SPITECTL_PATH, "status", "--socket", (dir.path() / "ctl.sock").string()});
  CHECK(r.exit_code == 0);
  d.signal(SIGTERM);
  CHECK(d.wait(20000) == 0);
  std::ifstream log(dir.path() / "log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("D-Bus: not published"));
}
