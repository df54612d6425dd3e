#include "spite/bus/daemon_bus.hpp"

#include <sdbus-c++/sdbus-c++.h>

#include <cstdlib>
#include <exception>

#include "serial_worker.hpp"
#include "spite/core/log.hpp"

namespace spite::bus {

namespace {

// Method calls waiting behind the running one before new ones are answered Busy.
constexpr std::size_t max_queued_methods = 16;
// Signals waiting to be sent before new ones are dropped (with a warning).
constexpr std::size_t max_queued_signals = 4096;

const char* error_kind(errc code) {
  switch (code) {
    case errc::invalid_argument: return "InvalidArgument";
    case errc::io: return "IOError";
    case errc::malformed: return "Malformed";
    case errc::unsupported: return "Unsupported";
    case errc::not_found: return "NotFound";
    case errc::out_of_range: return "OutOfRange";
    case errc::busy: return "Busy";
    case errc::internal: return "Failed";
    case errc::unavailable: return "Unavailable";
  }
  return "Failed";
}

sdbus::Error to_dbus(const error& e) { return sdbus::Error(error_name(e.code), e.message); }

// The address sd-bus will use, for error messages.
std::string bus_address(bool user_bus) {
  const char* variable = user_bus ? "DBUS_SESSION_BUS_ADDRESS" : "DBUS_SYSTEM_BUS_ADDRESS";
  if (const char* a = std::getenv(variable); a != nullptr && *a != '\0') return a;
  if (!user_bus) return "unix:path=/run/dbus/system_bus_socket";
  if (const char* r = std::getenv("XDG_RUNTIME_DIR"); r != nullptr && *r != '\0') {
    return std::string("unix:path=") + r + "/bus";
  }
  return "(none: DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset)";
}

// A property's value from its callback; a callback that throws becomes the D-Bus error Failed.
template <class T, class F>
T read_property(const char* name, const F& callback) {
  if (!callback) return T{};
  try {
    return callback();
  } catch (const sdbus::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw sdbus::Error(error_name(errc::internal), std::string(name) + ": " + e.what());
  }
}

result<void> run_method(const char* method, const std::function<result<void>()>& work) {
  try {
    return work();
  } catch (const std::exception& e) {
    return make_error(errc::internal, std::string(method) + ": " + e.what());
  } catch (...) {
    return make_error(errc::internal, std::string(method) + ": unknown exception");
  }
}

sdbus::Error stopping_error(const char* method) {
  return sdbus::Error(error_name(errc::internal), std::string(method) + ": the daemon is stopping");
}

error unsupported(const char* method) {
  return make_error(errc::unsupported, std::string(method) + " is not supported by this daemon");
}

}  // namespace

std::string error_name(errc code) { return std::string("org.spite.Daemon1.Error.") + error_kind(code); }

struct daemon_bus::impl {
  daemon_callbacks callbacks;
  std::unique_ptr<sdbus::IConnection> connection;
  std::unique_ptr<sdbus::IObject> object;
  bool loop_running = false;
  serial_worker methods{"method worker", max_queued_methods};
  serial_worker signals{"signal sender", max_queued_signals};

  ~impl() {
    methods.stop(/*cancel_pending=*/true);  // answers what waits; the bus loop still sends it
    signals.stop(/*cancel_pending=*/false);
    if (loop_running) connection->leaveEventLoop();
    object.reset();
    connection.reset();
  }

  void export_interface() {
    auto& o = *object;
    o.registerProperty("Version")
        .onInterface(interface_name)
        .withGetter([this] { return read_property<std::string>("Version", callbacks.version); })
        .withUpdateBehavior(sdbus::Flags::CONST_PROPERTY_VALUE);
    o.registerProperty("State").onInterface(interface_name).withGetter([this] {
      return read_property<std::string>("State", callbacks.state);
    });
    o.registerProperty("Models").onInterface(interface_name).withGetter([this] {
      return read_property<std::vector<std::string>>("Models", callbacks.models);
    });

    o.registerMethod("LoadModel")
        .onInterface(interface_name)
        .withInputParamNames("name", "path")
        .implementedAs([this](sdbus::Result<>&& reply, std::string name, std::string path) {
          submit("LoadModel", std::move(reply), [this, name = std::move(name), path = std::move(path)] {
            return callbacks.load_model ? callbacks.load_model(name, path) : unsupported("LoadModel");
          });
        });
    o.registerMethod("UnloadModel")
        .onInterface(interface_name)
        .withInputParamNames("name")
        .implementedAs([this](sdbus::Result<>&& reply, std::string name) {
          submit("UnloadModel", std::move(reply), [this, name = std::move(name)] {
            return callbacks.unload_model ? callbacks.unload_model(name) : unsupported("UnloadModel");
          });
        });
    o.registerMethod("Reload").onInterface(interface_name).implementedAs([this](sdbus::Result<>&& reply) {
      submit("Reload", std::move(reply), [this] { return callbacks.reload ? callbacks.reload() : unsupported("Reload"); });
    });

    o.registerSignal("ModelLoaded").onInterface(interface_name).withParameters<std::string>("name");
    o.registerSignal("ModelUnloaded").onInterface(interface_name).withParameters<std::string>("name");
    o.registerSignal("KernelsChanged")
        .onInterface(interface_name)
        .withParameters<std::uint64_t, std::vector<std::string>, std::vector<std::string>, std::vector<std::string>,
                        std::vector<sdbus::Struct<std::string, std::string>>>("generation", "added", "replaced",
                                                                               "removed", "refused");
    o.finishRegistration();
  }

  // Runs `work` on the method worker and answers the call when it returns (called on the bus
  // thread, which goes back to its loop at once).
  void submit(const char* method, sdbus::Result<>&& reply, std::function<result<void>()> work) {
    auto pending = std::make_shared<sdbus::Result<>>(std::move(reply));
    const auto posted = methods.post([pending, method, work = std::move(work)](bool cancelled) {
      if (cancelled) {
        pending->returnError(stopping_error(method));
        return;
      }
      const result<void> r = run_method(method, work);
      if (r) {
        pending->returnResults();
      } else {
        pending->returnError(to_dbus(r.err()));
      }
    });
    if (posted == serial_worker::posted::full) {
      pending->returnError(sdbus::Error(error_name(errc::busy),
                                        std::string(method) + ": " + std::to_string(max_queued_methods) +
                                            " calls are already waiting; try again later"));
    } else if (posted == serial_worker::posted::closed) {
      pending->returnError(stopping_error(method));
    }
  }

  void emit(const char* what, std::function<void()> send) {
    const auto posted = signals.post([what, send = std::move(send)](bool) {
      try {
        send();
      } catch (const std::exception& e) {
        log::warn("bus: cannot send ", what, ": ", e.what());
      }
    });
    if (posted == serial_worker::posted::full) log::warn("bus: too many signals waiting; ", what, " dropped");
  }
};

daemon_bus::daemon_bus(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
daemon_bus::~daemon_bus() = default;

result<std::unique_ptr<daemon_bus>> daemon_bus::connect(const bus_options& options, daemon_callbacks callbacks) {
  const std::string where = std::string("the D-Bus ") + (options.user_bus ? "session" : "system") + " bus at " +
                            bus_address(options.user_bus);
  auto p = std::make_unique<impl>();
  p->callbacks = std::move(callbacks);
  try {
    p->connection = options.user_bus ? sdbus::createSessionBusConnection() : sdbus::createSystemBusConnection();
  } catch (const sdbus::Error& e) {
    return make_error(errc::io, "cannot connect to " + where + ": " + e.getMessage());
  }
  try {
    p->object = sdbus::createObject(*p->connection, object_path);
    p->export_interface();
  } catch (const sdbus::Error& e) {
    return make_error(errc::internal, std::string("cannot export ") + object_path + " on " + where + ": " + e.getMessage());
  }
  // The name last: a client that sees it finds the object complete.
  try {
    p->connection->requestName(service_name);
  } catch (const sdbus::Error& e) {
    if (e.getName() == "org.freedesktop.DBus.Error.FileExists") {
      return make_error(errc::busy, std::string("cannot own ") + service_name + " on " + where +
                                        ": another process owns it (is another spited running?)");
    }
    std::string message = std::string("cannot own ") + service_name + " on " + where + ": " + e.getMessage();
    if (!options.user_bus) message += "; the policy dbus-1/system.d/org.spite.Daemon1.conf lets root and user spite own it";
    return make_error(errc::io, std::move(message));
  }
  try {
    p->connection->enterEventLoopAsync();
  } catch (const std::exception& e) {
    return make_error(errc::internal, "cannot start the D-Bus thread: " + std::string(e.what()));
  }
  p->loop_running = true;
  return std::unique_ptr<daemon_bus>(new daemon_bus(std::move(p)));
}

void daemon_bus::state_changed() {
  impl_->emit("PropertiesChanged(State)", [o = impl_->object.get()] {
    o->emitPropertiesChangedSignal(interface_name, {"State"});
  });
}

void daemon_bus::models_changed() {
  impl_->emit("PropertiesChanged(Models)", [o = impl_->object.get()] {
    o->emitPropertiesChangedSignal(interface_name, {"Models"});
  });
}

void daemon_bus::model_loaded(const std::string& name) {
  impl_->emit("ModelLoaded", [o = impl_->object.get(), name] {
    o->emitSignal("ModelLoaded").onInterface(interface_name).withArguments(name);
  });
}

void daemon_bus::model_unloaded(const std::string& name) {
  impl_->emit("ModelUnloaded", [o = impl_->object.get(), name] {
    o->emitSignal("ModelUnloaded").onInterface(interface_name).withArguments(name);
  });
}

void daemon_bus::kernels_changed(std::uint64_t generation, const std::vector<std::string>& added,
                                 const std::vector<std::string>& replaced, const std::vector<std::string>& removed,
                                 const std::vector<std::pair<std::string, std::string>>& refused) {
  std::vector<sdbus::Struct<std::string, std::string>> refused_structs;
  refused_structs.reserve(refused.size());
  for (const auto& [path, reason] : refused) refused_structs.push_back(sdbus::make_struct(path, reason));
  impl_->emit("KernelsChanged", [o = impl_->object.get(), generation, added, replaced, removed,
                                 refused_structs = std::move(refused_structs)] {
    o->emitSignal("KernelsChanged")
        .onInterface(interface_name)
        .withArguments(generation, added, replaced, removed, refused_structs);
  });
}

std::string daemon_bus::unique_name() const { return impl_->connection->getUniqueName(); }

}  // namespace spite::bus
