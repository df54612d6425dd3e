// org.spite.Daemon1 on a private session bus, seen by a real client (a second sdbus-c++
// connection): properties, methods and their errors, signals.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "bus_client.hpp"

using namespace spite;
using namespace spite::test;
using std::chrono::steady_clock;

namespace {

const bus::bus_options user_bus{.user_bus = true};

std::unique_ptr<bus::daemon_bus> connect_or_fail(bus::daemon_callbacks callbacks) {
  auto r = bus::daemon_bus::connect(user_bus, std::move(callbacks));
  INFO(describe(r));
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("bus: properties Version State and Models", "[bus]") {
  private_bus dbus(private_bus::kind::session);
  fake_daemon daemon;
  auto server = connect_or_fail(daemon.callbacks());
  bus_client client(dbus);

  CHECK(client.get<std::string>("Version") == "0.1.0-test");
  CHECK(client.get<std::string>("State") == "starting");
  daemon.set_state("running");
  CHECK(client.get<std::string>("State") == "running");
  CHECK(client.get<std::vector<std::string>>("Models") == std::vector<std::string>{"stories260K"});

  std::map<std::string, sdbus::Variant> all;
  client.proxy()
      .callMethod("GetAll")
      .onInterface("org.freedesktop.DBus.Properties")
      .withArguments(std::string(bus::interface_name))
      .storeResultsTo(all);
  CHECK(all.size() == 3);
  CHECK(all.at("State").get<std::string>() == "running");

  // Read-only.
  const std::string set = client.call_on("org.freedesktop.DBus.Properties", "Set", std::string(bus::interface_name),
                                         std::string("State"), sdbus::Variant(std::string("stopping")));
  CHECK(set.find("org.freedesktop.DBus.Error.PropertyReadOnly") == 0);
  CHECK(client.get<std::string>("State") == "running");

  std::string xml;
  client.proxy().callMethod("Introspect").onInterface("org.freedesktop.DBus.Introspectable").storeResultsTo(xml);
  for (const char* member : {"LoadModel", "UnloadModel", "Reload", "ModelLoaded", "ModelUnloaded", "KernelsChanged"}) {
    CHECK(xml.find(std::string("\"") + member + "\"") != std::string::npos);
  }
  CHECK(xml.find("<arg type=\"a(ss)\" name=\"refused\"/>") != std::string::npos);
  CHECK(server->unique_name().rfind(":", 0) == 0);
}

TEST_CASE("bus: LoadModel UnloadModel and Reload call the callbacks and return errors by name", "[bus]") {
  private_bus dbus(private_bus::kind::session);
  fake_daemon daemon;
  auto server = connect_or_fail(daemon.callbacks());
  bus_client client(dbus);

  CHECK(client.call("LoadModel", std::string("tiny"), std::string("/models/tiny.gguf")).empty());
  CHECK(client.call("UnloadModel", std::string("tiny")).empty());
  CHECK(client.call("Reload").empty());
  CHECK(daemon.recorded() == std::vector<std::string>{"load tiny /models/tiny.gguf", "unload tiny", "reload"});

  daemon.fail = make_error(errc::not_found, "no model named 'ghost' is loaded");
  CHECK(client.call("UnloadModel", std::string("ghost")) ==
        "org.spite.Daemon1.Error.NotFound: no model named 'ghost' is loaded");
  daemon.fail = make_error(errc::busy, "a reload is already running");
  CHECK(client.call("Reload") == "org.spite.Daemon1.Error.Busy: a reload is already running");
  daemon.fail = make_error(errc::invalid_argument, "'' is not a model name");
  CHECK(client.call("LoadModel", std::string(""), std::string("/x.gguf")) ==
        "org.spite.Daemon1.Error.InvalidArgument: '' is not a model name");
  daemon.fail = make_error(errc::internal, "out of memory");
  CHECK(client.call("LoadModel", std::string("big"), std::string("/big.gguf")) ==
        "org.spite.Daemon1.Error.Failed: out of memory");
  daemon.throw_next = true;
  CHECK(client.call("Reload") == "org.spite.Daemon1.Error.Failed: Reload: callback threw");
  // Wrong arguments never reach the daemon.
  CHECK(client.call("LoadModel", std::string("only-a-name")).find("org.freedesktop.DBus.Error.InvalidArgs") == 0);
  CHECK(daemon.recorded().size() == 8);
  // Still serving after all that.
  CHECK(client.call("Reload").empty());

  CHECK(bus::error_name(errc::io) == "org.spite.Daemon1.Error.IOError");
  CHECK(bus::error_name(errc::unsupported) == "org.spite.Daemon1.Error.Unsupported");
}

TEST_CASE("bus: a method the daemon does not provide answers Unsupported", "[bus]") {
  private_bus dbus(private_bus::kind::session);
  fake_daemon daemon;
  auto callbacks = daemon.callbacks();
  callbacks.reload = nullptr;
  callbacks.models = nullptr;
  auto server = connect_or_fail(std::move(callbacks));
  bus_client client(dbus);
  CHECK(client.call("Reload") == "org.spite.Daemon1.Error.Unsupported: Reload is not supported by this daemon");
  CHECK(client.get<std::vector<std::string>>("Models").empty());
}

TEST_CASE("bus: a slow LoadModel does not block property reads or other clients", "[bus]") {
  private_bus dbus(private_bus::kind::session);
  fake_daemon daemon;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  mailbox<std::string> started;
  auto callbacks = daemon.callbacks();
  callbacks.load_model = [&](const std::string& name, const std::string&) -> result<void> {
    started.put(name);
    released.wait();
    return ok();
  };
  auto server = connect_or_fail(std::move(callbacks));

  auto loading = std::async(std::launch::async, [&] {
    bus_client loader(dbus);
    return loader.call("LoadModel", std::string("slow"), std::string("/slow.gguf"));
  });
  REQUIRE(started.take() == "slow");

  bus_client other(dbus);
  const auto t0 = steady_clock::now();
  CHECK(other.get<std::string>("Version") == "0.1.0-test");
  CHECK(other.get<std::string>("State") == "starting");
  CHECK(steady_clock::now() - t0 < std::chrono::seconds(1));
  CHECK(loading.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);

  release.set_value();
  CHECK(loading.get().empty());
}

TEST_CASE("bus: signals ModelLoaded ModelUnloaded KernelsChanged and PropertiesChanged arrive", "[bus]") {
  private_bus dbus(private_bus::kind::session);
  fake_daemon daemon;
  auto server = connect_or_fail(daemon.callbacks());
  bus_client client(dbus);

  mailbox<std::string> loaded, unloaded;
  struct kernels {
    std::uint64_t generation;
    std::vector<std::string> added, replaced, removed;
    std::vector<sdbus::Struct<std::string, std::string>> refused;
  };
  mailbox<kernels> kernel_changes;
  mailbox<std::map<std::string, sdbus::Variant>> changed;
  auto& proxy = client.proxy();
  proxy.uponSignal("ModelLoaded").onInterface(bus::interface_name).call([&](const std::string& n) { loaded.put(n); });
  proxy.uponSignal("ModelUnloaded").onInterface(bus::interface_name).call([&](const std::string& n) { unloaded.put(n); });
  proxy.uponSignal("KernelsChanged")
      .onInterface(bus::interface_name)
      .call([&](std::uint64_t g, const std::vector<std::string>& a, const std::vector<std::string>& r,
                const std::vector<std::string>& d, const std::vector<sdbus::Struct<std::string, std::string>>& x) {
        kernel_changes.put({g, a, r, d, x});
      });
  proxy.uponSignal("PropertiesChanged")
      .onInterface("org.freedesktop.DBus.Properties")
      .call([&](const std::string& iface, const std::map<std::string, sdbus::Variant>& values,
                const std::vector<std::string>&) {
        if (iface == bus::interface_name) changed.put(values);
      });
  proxy.finishRegistration();

  server->model_loaded("tiny");
  server->model_unloaded("old");
  CHECK(loaded.take() == "tiny");
  CHECK(unloaded.take() == "old");

  server->kernels_changed(7, {"llama/llama3/x86_64_v4/libk.so"}, {"generic/generic/x86_64/libg.so"}, {},
                          {{"/kernels/bad/libbad.so", "not owned by root or us"}});
  const auto k = kernel_changes.take();
  REQUIRE(k.has_value());
  CHECK(k->generation == 7);
  CHECK(k->added == std::vector<std::string>{"llama/llama3/x86_64_v4/libk.so"});
  CHECK(k->replaced == std::vector<std::string>{"generic/generic/x86_64/libg.so"});
  CHECK(k->removed.empty());
  REQUIRE(k->refused.size() == 1);
  CHECK(k->refused[0].get<0>() == "/kernels/bad/libbad.so");
  CHECK(k->refused[0].get<1>() == "not owned by root or us");

  daemon.set_state("reloading");
  server->state_changed();
  auto c = changed.take();
  REQUIRE(c.has_value());
  REQUIRE(c->count("State") == 1);
  CHECK(c->at("State").get<std::string>() == "reloading");
  CHECK(c->count("Models") == 0);

  {
    std::lock_guard lock(daemon.mutex);
    daemon.models.push_back("tiny");
  }
  server->models_changed();
  c = changed.take();
  REQUIRE(c.has_value());
  REQUIRE(c->count("Models") == 1);
  CHECK(c->at("Models").get<std::vector<std::string>>() == std::vector<std::string>{"stories260K", "tiny"});

  // Emitting while holding the lock the getters take does not deadlock (the signal goes out later).
  {
    std::lock_guard lock(daemon.mutex);
    daemon.state = "stopping";
    server->state_changed();
  }
  c = changed.take();
  REQUIRE(c.has_value());
  CHECK(c->at("State").get<std::string>() == "stopping");
}

TEST_CASE("bus: a second daemon cannot take the name", "[bus]") {
  private_bus dbus(private_bus::kind::session);
  fake_daemon daemon;
  auto first = connect_or_fail(daemon.callbacks());
  auto second = bus::daemon_bus::connect(user_bus, daemon.callbacks());
  REQUIRE_FALSE(second.ok());
  CHECK(second.err().code == errc::busy);
  CHECK_THAT(second.err().message, Catch::Contains("another process owns it"));
  // The first one still answers.
  bus_client client(dbus);
  CHECK(client.get<std::string>("Version") == "0.1.0-test");
}

TEST_CASE("bus: connect fails fast with a readable message when no bus is there", "[bus]") {
  temp_dir dir;
  const std::string address = "unix:path=" + (dir / "no-such-socket").string();
  for (const bool user : {false, true}) {
    const char* variable = user ? "DBUS_SESSION_BUS_ADDRESS" : "DBUS_SYSTEM_BUS_ADDRESS";
    ::setenv(variable, address.c_str(), 1);
    fake_daemon daemon;
    const auto t0 = steady_clock::now();
    auto r = bus::daemon_bus::connect({.user_bus = user}, daemon.callbacks());
    const auto took = steady_clock::now() - t0;
    ::unsetenv(variable);
    REQUIRE_FALSE(r.ok());
    INFO(r.err().message);
    CHECK(r.err().code == errc::io);
    CHECK_THAT(r.err().message, Catch::StartsWith(std::string("cannot connect to the D-Bus ") +
                                                  (user ? "session" : "system") + " bus at " + address + ": "));
    CHECK(r.err().message.find('\n') == std::string::npos);
    CHECK(took < std::chrono::milliseconds(500));
  }
}
