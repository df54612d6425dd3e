// spited on D-Bus: the object /org/spite/Daemon1 (interface org.spite.Daemon1) under the bus name
// org.spite.Daemon1, on the system bus (or the session bus with bus_options::user_bus).
//
//   properties (read-only)  Version s, State s ("starting", "running", "reloading", "stopping"),
//                           Models as (names of the loaded models); PropertiesChanged carries
//                           State and Models when the daemon says they changed
//   methods                 LoadModel(s name, s path), UnloadModel(s name), Reload()
//   signals                 ModelLoaded(s name), ModelUnloaded(s name),
//                           KernelsChanged(t generation, as added, as replaced, as removed,
//                                          a(ss) refused /* path, reason */)
//
// A failed method returns the D-Bus error org.spite.Daemon1.Error.<Kind> (error_name()) with the
// callback's message. The methods run one at a time, in arrival order, on a worker thread of
// their own, and their reply is sent when the callback returns (an asynchronous reply), so a
// model that takes seconds to load never holds up property reads or other clients. Who may call
// them on the system bus is decided by the policy file systemd/org.spite.Daemon1.conf.
//
// sdbus-c++ stays behind this header: nothing here needs its headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::bus {

inline constexpr const char* service_name = "org.spite.Daemon1";
inline constexpr const char* object_path = "/org/spite/Daemon1";
inline constexpr const char* interface_name = "org.spite.Daemon1";

// "org.spite.Daemon1.Error." + InvalidArgument, IOError, Malformed, Unsupported, NotFound,
// OutOfRange, Busy, or Failed (errc::internal).
std::string error_name(errc code);

// What the bus asks the daemon. version/state/models answer property reads on the bus thread (and
// on the bus's signal thread, for PropertiesChanged): they must be quick and must not wait for
// anything the daemon holds while it calls daemon_bus. load_model/unload_model/reload run on the
// bus's worker thread and may take as long as they need. An unset callback reads as "" / no
// models, and an unset method answers Unsupported. A callback that throws answers Failed.
struct daemon_callbacks {
  std::function<std::string()> version, state;
  std::function<std::vector<std::string>()> models;
  std::function<result<void>(const std::string& name, const std::string& path)> load_model;
  std::function<result<void>(const std::string& name)> unload_model;
  std::function<result<void>()> reload;
};

struct bus_options {
  bool user_bus = false;  // the system bus by default; the session bus (spited --user) when set
};

class daemon_bus {
 public:
  // Connects (sd-bus honours DBUS_SYSTEM_BUS_ADDRESS / DBUS_SESSION_BUS_ADDRESS), exports the
  // object and takes the name. Errors, each one line naming the bus and its address:
  // errc::io when no bus answers there or the bus's policy refuses the name, errc::busy when
  // another process already owns the name.
  static result<std::unique_ptr<daemon_bus>> connect(const bus_options& options, daemon_callbacks callbacks);

  // Lets the method running now finish and answers the queued ones with Failed ("stopping"),
  // sends the signals still pending, then leaves the bus. The callbacks may be called until it
  // returns; do not destroy the daemon_bus from inside one of them.
  ~daemon_bus();
  daemon_bus(const daemon_bus&) = delete;
  daemon_bus& operator=(const daemon_bus&) = delete;

  // Signals. Thread-safe and non-blocking: each call is queued and sent from the bus's signal
  // thread in call order, so the caller may hold any lock (state_changed/models_changed read the
  // new value through the callbacks when they are sent).
  void state_changed();   // PropertiesChanged {State}
  void models_changed();  // PropertiesChanged {Models}
  void model_loaded(const std::string& name);
  void model_unloaded(const std::string& name);
  void kernels_changed(std::uint64_t generation, const std::vector<std::string>& added,
                       const std::vector<std::string>& replaced, const std::vector<std::string>& removed,
                       const std::vector<std::pair<std::string, std::string>>& refused);

  // The unique name of the connection (":1.42"), for logs.
  std::string unique_name() const;

 private:
  struct impl;
  explicit daemon_bus(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace spite::bus
